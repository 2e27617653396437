// CallTracker: a gRPC server interceptor factory that does two jobs for
// every call of a server:
//   - counts the calls in flight, so that shutdown can wait for them to
//     finish and then close the server at once (Server::Shutdown with a
//     later deadline also waits for idle client connections to go away,
//     which kept an idle daemon from exiting for seconds);
//   - answers a unary request body that does not parse with
//     INVALID_ARGUMENT naming the method. gRPC's callback API answers it
//     UNIMPLEMENTED, which tells the client the method does not exist.
//
// Example:
//   auto tracker = std::make_shared<CallTracker::Counter>();
//   std::vector<std::unique_ptr<
//       grpc::experimental::ServerInterceptorFactoryInterface>> creators;
//   creators.push_back(std::make_unique<CallTracker>(tracker));
//   builder.experimental().SetInterceptorCreators(std::move(creators));
//   ...
//   tracker->WaitIdle(absl::Now() + absl::Seconds(5));
//   server->Shutdown(std::chrono::system_clock::now());
#ifndef RDMAD_DAEMON_SERVICE_CALL_TRACKER_H_
#define RDMAD_DAEMON_SERVICE_CALL_TRACKER_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/support/server_interceptor.h"

namespace rdmad::service {

class CallTracker final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // Calls in flight on one server. Thread-safe; shared by the factory and
  // every call's interceptor, so it outlives whichever goes last.
  class Counter {
   public:
    void Add() ABSL_LOCKS_EXCLUDED(mu_);
    void Remove() ABSL_LOCKS_EXCLUDED(mu_);
    uint64_t active() const ABSL_LOCKS_EXCLUDED(mu_);
    // Waits until no call is in flight or `deadline` passes; true if idle.
    bool WaitIdle(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

   private:
    mutable absl::Mutex mu_;
    uint64_t active_ ABSL_GUARDED_BY(mu_) = 0;
  };

  explicit CallTracker(std::shared_ptr<Counter> counter)
      : counter_(std::move(counter)) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  std::shared_ptr<Counter> counter_;
};

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_CALL_TRACKER_H_
