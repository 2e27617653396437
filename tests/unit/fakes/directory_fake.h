// A cluster directory for unit tests: it answers every call at once from
// what the test set, and remembers what it was last asked.
#ifndef RDMAD_TESTS_UNIT_FAKES_DIRECTORY_FAKE_H_
#define RDMAD_TESTS_UNIT_FAKES_DIRECTORY_FAKE_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/directory/cluster_directory.h"

namespace rdmad::directory::testing {

// Answers every call at once (inline, on the caller's thread) from its
// public fields. Set them before the calls; not for concurrent use.
class FakeDirectory final : public ClusterDirectory {
 public:
  // What state() returns.
  DirectoryState snapshot;
  // What Lookup and Resolve answer, and whether Lookup says it came from
  // the cache.
  absl::StatusOr<core::DirectoryEntry> entry =
      absl::NotFoundError("no region by that name in the cluster");
  bool from_cache = false;
  // What List answers.
  absl::StatusOr<DirectoryListing> listing = DirectoryListing{};
  // What Claim answers.
  absl::Status claim = absl::OkStatus();
  // The last call's arguments.
  std::string asked_name;
  std::string asked_prefix;
  std::optional<bool> asked_fresh;

  void Resolve(const std::string& name, absl::Time, core::DirectoryGeneration,
               core::ResolveDone done) override {
    asked_name = name;
    done(entry);
  }
  std::string self_node() const override { return "127.0.0.1:7471"; }
  void OnRegionChanged(const std::string&) override {}
  void Claim(const std::string& name, absl::Time,
             std::function<void(absl::Status)> done) override {
    asked_name = name;
    done(claim);
  }
  void Lookup(const std::string& name, absl::Time, bool fresh,
              std::function<void(absl::StatusOr<core::DirectoryEntry>, bool)>
                  done) override {
    asked_name = name;
    asked_fresh = fresh;
    done(entry, from_cache);
  }
  void List(const std::string& name_prefix, absl::Time,
            std::function<void(absl::StatusOr<DirectoryListing>)> done)
      override {
    asked_prefix = name_prefix;
    done(listing);
  }
  DirectoryState state() const override { return snapshot; }
};

}  // namespace rdmad::directory::testing

#endif  // RDMAD_TESTS_UNIT_FAKES_DIRECTORY_FAKE_H_
