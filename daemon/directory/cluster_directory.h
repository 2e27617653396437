// ClusterDirectory: what the daemon and its services call on the cluster
// directory of exported regions. EtcdDirectory implements it on etcd v3;
// tests may fake it. See docs/DIRECTORY.md.
#ifndef RDMAD_DAEMON_DIRECTORY_CLUSTER_DIRECTORY_H_
#define RDMAD_DAEMON_DIRECTORY_CLUSTER_DIRECTORY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/core/region_observer.h"
#include "daemon/core/region_resolver.h"

namespace rdmad::directory {

// Where the daemon's link to the store stands.
enum class DirectoryLink : uint8_t {
  kConnecting,    // not reached yet
  kConnected,     // a lease is held and the session runs
  kDisconnected,  // was connected, lost it, reconnecting
  kStopped,       // shut down
};

// "connecting", "connected", "disconnected", "stopped": the words of
// GetStatus (DirectoryStatus.state) and logs.
constexpr absl::string_view DirectoryLinkName(DirectoryLink link) {
  switch (link) {
    case DirectoryLink::kConnecting:
      return "connecting";
    case DirectoryLink::kConnected:
      return "connected";
    case DirectoryLink::kDisconnected:
      return "disconnected";
    case DirectoryLink::kStopped:
      return "stopped";
  }
  return "unknown";
}

// A snapshot for GetStatus and metrics.
struct DirectoryState {
  std::string url;
  std::string endpoint;
  std::string prefix;
  DirectoryLink state = DirectoryLink::kConnecting;
  std::string last_error;
  absl::Time state_since;
  int64_t lease_id = 0;
  int64_t lease_ttl_seconds = 0;
  uint64_t published_regions = 0;
  std::vector<std::string> conflicts;  // "NAME (held by HOST:PORT)"
  uint64_t cached_regions = 0;
  bool watch_live = false;
  int64_t revision = 0;
  uint64_t reconnects = 0;
  uint64_t lookups_cached = 0;
  uint64_t lookups_store = 0;
  uint64_t lookups_failed = 0;
};

struct DirectoryListing {
  std::vector<core::DirectoryEntry> entries;  // sorted by name
  int64_t revision = 0;
  bool truncated = false;
  uint32_t unreadable = 0;
};

// Thread-safe; no call blocks its caller on the store.
class ClusterDirectory : public core::RegionResolver,
                         public core::RegionObserver {
 public:
  // Completes when the export of `name` here is published: OK,
  // ALREADY_EXISTS if another daemon holds the name, UNAVAILABLE if the
  // store cannot be reached to decide (a name this daemon already holds
  // needs no decision: OK). `done` runs once, on another thread or inline.
  virtual void Claim(const std::string& name, absl::Time deadline,
                     std::function<void(absl::Status)> done) = 0;
  // Looks a name up; `fresh` skips the cache. `done(entry, from_cache)`.
  virtual void Lookup(
      const std::string& name, absl::Time deadline, bool fresh,
      std::function<void(absl::StatusOr<core::DirectoryEntry>, bool)> done) = 0;
  // Lists entries whose name starts with `name_prefix`, from the store.
  virtual void List(
      const std::string& name_prefix, absl::Time deadline,
      std::function<void(absl::StatusOr<DirectoryListing>)> done) = 0;
  virtual DirectoryState state() const = 0;
};

}  // namespace rdmad::directory

#endif  // RDMAD_DAEMON_DIRECTORY_CLUSTER_DIRECTORY_H_
