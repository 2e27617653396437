#include "daemon/process/self_check.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::process {

struct SelfCheck::Impl {
  std::string socket;
  std::unique_ptr<v1::Local::Stub> stub;
};

SelfCheck::SelfCheck(std::string local_socket)
    : impl_(std::make_unique<Impl>()) {
  impl_->socket = std::move(local_socket);
  // One channel for the daemon's life: it reconnects by itself, and a new
  // connection per check would churn sockets every few seconds.
  impl_->stub = v1::Local::NewStub(grpc::CreateChannel(
      absl::StrCat("unix:", impl_->socket), grpc::InsecureChannelCredentials()));
}

SelfCheck::~SelfCheck() = default;

absl::Status SelfCheck::Run(absl::Duration deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  v1::GetStatusResponse response;
  const grpc::Status status =
      impl_->stub->GetStatus(&context, v1::GetStatusRequest(), &response);
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "GetStatus on ", impl_->socket, " failed: ", status.error_message()));
  }
  if (response.pid() != static_cast<uint32_t>(::getpid())) {
    return absl::FailedPreconditionError(absl::StrCat(
        impl_->socket, " is answered by pid ", response.pid(), ", not us"));
  }
  return absl::OkStatus();
}

}  // namespace rdmad::process
