#include "daemon/core/directory_route.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rdmad::core {
namespace {

// One transfer on its way through the directory.
struct Routed {
  RegionResolver* directory;  // Not owned.
  const HolderTrust* trust;   // Not owned; may be null.
  RemoteTransfers* remote;    // Not owned.
  Transfer transfer;          // what to send; its `done` is below
  TransferDone done;
  bool retried = false;
};

std::string Generation(const DirectoryGeneration& g) {
  return absl::StrFormat("%x/%d", g.incarnation, g.revision);
}

void Finish(const std::shared_ptr<Routed>& routed,
            absl::StatusOr<TransferResult> result) {
  TransferDone done = std::move(routed->done);
  done(std::move(result));
}

void SendTo(std::shared_ptr<Routed> routed, DirectoryEntry entry);

// The transfer to `entry` failed with `status`: re-resolve once.
void Reresolve(std::shared_ptr<Routed> routed, const DirectoryEntry& entry,
               absl::Status status) {
  routed->retried = true;
  // Read before `routed` moves into the callback (argument order is
  // unspecified).
  const std::string name = routed->transfer.remote.name;
  const absl::Time deadline = routed->transfer.deadline;
  RegionResolver* directory = routed->directory;
  directory->Resolve(
      name, deadline, entry.generation,
      [routed = std::move(routed), entry, status = std::move(status)](
          absl::StatusOr<DirectoryEntry> next) mutable {
        if (!next.ok() || next->generation == entry.generation) {
          // The directory has nothing newer: the failure stands, said
          // with the entry it came from.
          return Finish(
              routed,
              absl::Status(
                  status.code(),
                  absl::StrCat(
                      status.message(), " (region '", entry.name,
                      "' as the cluster directory listed it on ", entry.node,
                      ", generation ", Generation(entry.generation),
                      next.ok() ? "; the directory has no newer entry"
                                : absl::StrCat("; looking it up again: ",
                                               next.status().message()),
                      ")")));
        }
        SendTo(std::move(routed), *std::move(next));
      });
}

void SendTo(std::shared_ptr<Routed> routed, DirectoryEntry entry) {
  if (entry.node == routed->directory->self_node()) {
    // Listed on this daemon, yet not exported here (the caller checked):
    // being freed or unexported while the entry is still on its way out.
    absl::Status gone = absl::NotFoundError(absl::StrCat(
        "region '", entry.name, "' is not exported on this daemon"));
    if (!routed->retried) return Reresolve(std::move(routed), entry, gone);
    return Finish(routed, absl::NotFoundError(absl::StrCat(
                              "region '", entry.name,
                              "' is listed in the cluster directory on this "
                              "daemon, but it is not exported here (freed or "
                              "unexported)")));
  }
  const HolderTrust* trust = routed->trust;
  if (trust != nullptr) {
    // A record this daemon would not send bytes to, whoever answers: the
    // rightful holder may have re-published it since (it re-asserts a
    // record someone else overwrote), so look once more.
    if (absl::Status refused = trust->CheckRecord(entry); !refused.ok()) {
      if (!routed->retried) {
        return Reresolve(std::move(routed), entry, std::move(refused));
      }
      return Finish(routed, std::move(refused));
    }
  }
  const Transfer& base = routed->transfer;
  Transfer t;
  t.op = base.op;
  t.local = base.local;
  t.local_offset = base.local_offset;
  t.length = base.length;
  t.remote = base.remote;
  t.remote.peer = entry.node;
  // Fences: the holder must still have this very region under the name.
  t.remote.expect_incarnation = entry.generation.incarnation;
  t.remote.expect_region_id = entry.region_id;
  // And it must be a daemon this one trusts for the name, as it answers.
  if (trust != nullptr && trust->checks_holders()) {
    t.remote.holder_trust = trust;
    t.remote.expect_identity = entry.identity;
  }
  t.deadline = base.deadline;
  t.uid = base.uid;
  t.start = base.start;
  RemoteTransfers* remote = routed->remote;
  t.done = [routed = std::move(routed), entry = std::move(entry)](
               absl::StatusOr<TransferResult> result) mutable {
    const absl::StatusCode code = result.status().code();
    const bool stale = code == absl::StatusCode::kNotFound ||
                       code == absl::StatusCode::kUnavailable;
    if (!result.ok() && stale && !routed->retried &&
        absl::Now() < routed->transfer.deadline) {
      return Reresolve(std::move(routed), entry, result.status());
    }
    Finish(routed, std::move(result));
  };
  remote->SubmitBatch(absl::MakeSpan(&t, 1));
}

}  // namespace

void RouteThroughDirectory(RegionResolver* directory, const HolderTrust* trust,
                           RemoteTransfers* remote, Transfer transfer) {
  auto routed = std::make_shared<Routed>();
  routed->directory = directory;
  routed->trust = trust;
  routed->remote = remote;
  routed->done = std::move(transfer.done);
  routed->transfer = std::move(transfer);
  const std::string name = routed->transfer.remote.name;
  const absl::Time deadline = routed->transfer.deadline;
  directory->Resolve(name, deadline, {},
                     [routed](absl::StatusOr<DirectoryEntry> entry) mutable {
                       if (!entry.ok()) return Finish(routed, entry.status());
                       SendTo(std::move(routed), *std::move(entry));
                     });
}

}  // namespace rdmad::core
