// The Local service's part in the cluster directory: waiting for an
// export's name to be claimed, and the directory's status and entries as
// rdmad.v1 messages. Kept apart from local_service.cc.
#ifndef RDMAD_DAEMON_SERVICE_DIRECTORY_CALLS_H_
#define RDMAD_DAEMON_SERVICE_DIRECTORY_CALLS_H_

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "daemon/directory/cluster_directory.h"
#include "grpcpp/grpcpp.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::service {

// Finishes `reactor` OK once the export of `name` is published in the
// cluster directory. If the name is not this daemon's to take (another
// daemon holds it: ALREADY_EXISTS; etcd unreachable: UNAVAILABLE), runs
// `undo` (revoke the export, or free the new region) and finishes with
// that status. Returns at once. Without a directory, finishes OK now.
void FinishAfterClaim(directory::ClusterDirectory* directory,
                      grpc::ServerUnaryReactor* reactor,
                      const std::string& name, absl::Time deadline,
                      std::function<void()> undo);

void ToProto(const directory::DirectoryState& state, v1::DirectoryStatus* out);
void ToProto(const core::DirectoryEntry& entry, v1::ClusterRegion* out);

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_DIRECTORY_CALLS_H_
