// The one place where absl::Status becomes grpc::Status. Codes map one to
// one (both follow google.rpc.Code); the message travels unchanged.
#ifndef RDMAD_DAEMON_SERVICE_GRPC_STATUS_H_
#define RDMAD_DAEMON_SERVICE_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace rdmad::service {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_GRPC_STATUS_H_
