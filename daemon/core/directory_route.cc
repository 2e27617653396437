#include "daemon/core/directory_route.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rdmad::core {
namespace {

// One transfer on its way through the directory.
struct Routed {
  RegionResolver* directory;  // Not owned.
  RemoteTransfers* remote;    // Not owned.
  TransferRequest request;
  std::shared_ptr<Region> local;
  TransferDone done;
  bool retried = false;
};

std::string Generation(const DirectoryGeneration& g) {
  return absl::StrFormat("%x/%d", g.incarnation, g.revision);
}

void SendTo(std::shared_ptr<Routed> routed, DirectoryEntry entry);

// The transfer to `entry` failed with `status`: re-resolve once.
void Reresolve(std::shared_ptr<Routed> routed, const DirectoryEntry& entry,
               absl::Status status) {
  routed->retried = true;
  // Read before `routed` moves into the callback (argument order is
  // unspecified).
  const std::string name = routed->request.remote_name;
  const absl::Time deadline = routed->request.deadline;
  RegionResolver* directory = routed->directory;
  directory->Resolve(
      name, deadline, entry.generation,
      [routed = std::move(routed), entry, status = std::move(status)](
          absl::StatusOr<DirectoryEntry> next) mutable {
        if (!next.ok() || next->generation == entry.generation) {
          // The directory has nothing newer: the failure stands, said
          // with the entry it came from.
          TransferDone done = std::move(routed->done);
          return done(absl::Status(
              status.code(),
              absl::StrCat(status.message(), " (region '", entry.name,
                           "' as the cluster directory listed it on ",
                           entry.node, ", generation ",
                           Generation(entry.generation),
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
    TransferDone done = std::move(routed->done);
    return done(absl::NotFoundError(absl::StrCat(
        "region '", entry.name, "' is listed in the cluster directory on this "
        "daemon, but it is not exported here (freed or unexported)")));
  }
  TransferRequest request = routed->request;
  request.peer = entry.node;
  // Fences: the holder must still have this very region under the name.
  request.expect_incarnation = entry.generation.incarnation;
  request.expect_region_id = entry.region_id;
  RemoteTransfers* remote = routed->remote;
  std::shared_ptr<Region> local = routed->local;
  remote->Submit(request, std::move(local),
                 [routed = std::move(routed), entry = std::move(entry)](
                     absl::StatusOr<TransferResult> result) mutable {
                   const absl::StatusCode code = result.status().code();
                   const bool stale = code == absl::StatusCode::kNotFound ||
                                      code == absl::StatusCode::kUnavailable;
                   if (!result.ok() && stale && !routed->retried &&
                       absl::Now() < routed->request.deadline) {
                     return Reresolve(std::move(routed), entry,
                                      result.status());
                   }
                   TransferDone done = std::move(routed->done);
                   done(std::move(result));
                 });
}

}  // namespace

void RouteThroughDirectory(RegionResolver* directory, RemoteTransfers* remote,
                           const TransferRequest& request,
                           std::shared_ptr<Region> local, TransferDone done) {
  auto routed = std::make_shared<Routed>(
      Routed{directory, remote, request, std::move(local), std::move(done)});
  directory->Resolve(request.remote_name, request.deadline, {},
                     [routed](absl::StatusOr<DirectoryEntry> entry) mutable {
                       if (!entry.ok()) {
                         TransferDone done = std::move(routed->done);
                         return done(entry.status());
                       }
                       SendTo(std::move(routed), *std::move(entry));
                     });
}

}  // namespace rdmad::core
