// The Local service's part in the cluster directory: its calls on it, and
// the directory's status and entries as rdmad.v1 messages. Kept apart from
// local_service.cc.
#ifndef RDMAD_DAEMON_SERVICE_DIRECTORY_CALLS_H_
#define RDMAD_DAEMON_SERVICE_DIRECTORY_CALLS_H_

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "daemon/directory/cluster_directory.h"
#include "grpcpp/grpcpp.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::service {

// The Local service's calls on the cluster directory: its listing and
// look-ups (ListClusterRegions, LookupRegion), and the wait for an export's
// name to be claimed. It calls the directory only through
// directory::ClusterDirectory. Thread-safe: it holds nothing but the
// pointer, and the directory is thread-safe.
class DirectoryCalls {
 public:
  // `directory` is not owned and outlives this; null when the daemon has
  // none (the two calls then fail FAILED_PRECONDITION saying how to set
  // one up).
  explicit DirectoryCalls(directory::ClusterDirectory* directory)
      : directory_(directory) {}

  grpc::ServerUnaryReactor* ListClusterRegions(
      grpc::CallbackServerContext* context,
      const v1::ListClusterRegionsRequest* request,
      v1::ListClusterRegionsResponse* response) const;
  grpc::ServerUnaryReactor* LookupRegion(
      grpc::CallbackServerContext* context,
      const v1::LookupRegionRequest* request,
      v1::LookupRegionResponse* response) const;

  // Finishes `reactor` OK once the export of `name` is published in the
  // cluster directory. If the name is not this daemon's to take (another
  // daemon holds it: ALREADY_EXISTS; etcd unreachable: UNAVAILABLE), runs
  // `undo` (revoke the export, or free the new region) and finishes with
  // that status. Returns at once. Without a directory, finishes OK now.
  void FinishAfterClaim(grpc::ServerUnaryReactor* reactor,
                        const std::string& name, absl::Time deadline,
                        std::function<void()> undo) const;

 private:
  directory::ClusterDirectory* const directory_;  // Not owned; may be null.
};

void ToProto(const directory::DirectoryState& state, v1::DirectoryStatus* out);
void ToProto(const core::DirectoryEntry& entry, v1::ClusterRegion* out);

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_DIRECTORY_CALLS_H_
