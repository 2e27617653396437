// Small helpers of the callback-API services.
#ifndef RDMAD_DAEMON_SERVICE_REACTOR_UTIL_H_
#define RDMAD_DAEMON_SERVICE_REACTOR_UTIL_H_

#include <chrono>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/service/grpc_status.h"
#include "grpcpp/grpcpp.h"

namespace rdmad::service {

// Finishes a unary call with `status` and returns its reactor.
inline grpc::ServerUnaryReactor* FinishCall(
    grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// The call's deadline; InfiniteFuture when the client set none.
inline absl::Time CallDeadline(grpc::CallbackServerContext* context) {
  const auto deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_REACTOR_UTIL_H_
