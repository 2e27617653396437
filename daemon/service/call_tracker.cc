#include "daemon/service/call_tracker.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/support/status.h"

namespace rdmad::service {
namespace {

using grpc::experimental::InterceptionHookPoints;

class TrackingInterceptor final : public grpc::experimental::Interceptor {
 public:
  TrackingInterceptor(std::shared_ptr<CallTracker::Counter> counter,
                      std::string method, bool unary)
      : counter_(std::move(counter)),
        method_(std::move(method)),
        unary_(unary) {
    counter_->Add();
  }
  ~TrackingInterceptor() override { counter_->Remove(); }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      // The request did not deserialize.
      unparsed_ = true;
    }
    if (unparsed_ && unary_ &&
        methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS) &&
        methods->GetSendStatus().error_code() ==
            grpc::StatusCode::UNIMPLEMENTED) {
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("the request body of ", method_,
                       " does not parse as its protobuf message: send a "
                       "serialized request of the method's type")));
    }
    methods->Proceed();
  }

 private:
  const std::shared_ptr<CallTracker::Counter> counter_;
  const std::string method_;
  const bool unary_;
  bool unparsed_ = false;
};

}  // namespace

void CallTracker::Counter::Add() {
  absl::MutexLock lock(&mu_);
  ++active_;
}

void CallTracker::Counter::Remove() {
  absl::MutexLock lock(&mu_);
  --active_;
}

uint64_t CallTracker::Counter::active() const {
  absl::MutexLock lock(&mu_);
  return active_;
}

bool CallTracker::Counter::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  // AwaitWithTimeout rather than ...WithDeadline: the TSan build's shim
  // (cmake/tsan_absl_shim.cc) annotates that one.
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](uint64_t* active) { return *active == 0; }, &active_),
      deadline - absl::Now());
}

grpc::experimental::Interceptor* CallTracker::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new TrackingInterceptor(
      counter_, info->method() != nullptr ? info->method() : "",
      info->type() == grpc::experimental::ServerRpcInfo::Type::UNARY);
}

}  // namespace rdmad::service
