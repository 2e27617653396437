// Fakes for unit tests of the gRPC services (daemon/service): a connect
// acceptor that records what it was asked, and an in-process gRPC server to
// call a service through, as a client would. The cluster directory's fake
// is in directory_fake.h.
#ifndef RDMAD_TESTS_UNIT_FAKES_SERVICE_FAKES_H_
#define RDMAD_TESTS_UNIT_FAKES_SERVICE_FAKES_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/transport/transport.h"
#include "grpcpp/grpcpp.h"

namespace rdmad::service::testing {

// Answers Connect with `answer` (OK unless set), leaving the response
// to the service, and records each request. Thread-safe.
class FakeAcceptor final : public transport::ConnectAcceptor {
 public:
  explicit FakeAcceptor(core::TransportKind kind) : kind_(kind) {}

  core::TransportKind kind() const override { return kind_; }
  absl::Status Accept(const v1::ConnectRequest& request,
                      const std::string&,
                      v1::ConnectResponse*) override {
    absl::MutexLock lock(&mu_);
    ++accepted_;
    last_request_ = request;
    return answer_;
  }

  void set_answer(absl::Status answer) {
    absl::MutexLock lock(&mu_);
    answer_ = std::move(answer);
  }
  int accepted() const {
    absl::MutexLock lock(&mu_);
    return accepted_;
  }
  v1::ConnectRequest last_request() const {
    absl::MutexLock lock(&mu_);
    return last_request_;
  }
  std::vector<NoticeQueue> NoticeQueues() const override {
    absl::MutexLock lock(&mu_);
    return notice_queues_;
  }
  void set_notice_queues(std::vector<NoticeQueue> queues) {
    absl::MutexLock lock(&mu_);
    notice_queues_ = std::move(queues);
  }

 private:
  const core::TransportKind kind_;
  mutable absl::Mutex mu_;
  absl::Status answer_ ABSL_GUARDED_BY(mu_) = absl::OkStatus();
  int accepted_ ABSL_GUARDED_BY(mu_) = 0;
  v1::ConnectRequest last_request_ ABSL_GUARDED_BY(mu_);
  std::vector<NoticeQueue> notice_queues_ ABSL_GUARDED_BY(mu_);
};

// Serves `service` (not owned; it outlives this) in process, with no
// socket, until destroyed. Callers reach it through channel().
class InProcessServer {
 public:
  explicit InProcessServer(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
    channel_ = server_->InProcessChannel(grpc::ChannelArguments());
  }
  ~InProcessServer() { server_->Shutdown(absl::ToChronoTime(absl::Now())); }

  std::shared_ptr<grpc::Channel> channel() const { return channel_; }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace rdmad::service::testing

#endif  // RDMAD_TESTS_UNIT_FAKES_SERVICE_FAKES_H_
