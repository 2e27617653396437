// CallTracker: the gRPC client calls the peer layer has outstanding, so
// that shutdown can cancel them and wait until their callbacks have run
// (they use objects that shutdown destroys next).
#ifndef RDMAD_DAEMON_PEER_CALL_TRACKER_H_
#define RDMAD_DAEMON_PEER_CALL_TRACKER_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace rdmad::peer {

// Thread-safe.
class CallTracker {
 public:
  // Tracks a call about to start: its context, kept alive by `owner`.
  // False once shutting down: then the call must not be started.
  bool Track(grpc::ClientContext* context, std::shared_ptr<void> owner);
  // From the call's callback, as its last act. Destroys the tracked owner
  // before Shutdown can return, when it holds the last reference: so a
  // callback that dropped its own references first leaves nothing of the
  // call behind once Shutdown has returned.
  void Untrack(grpc::ClientContext* context);

  // Refuses new calls, cancels those outstanding and waits (at most
  // `timeout`) until each has called Untrack. Idempotent.
  void Shutdown(absl::Duration timeout = absl::Seconds(30));

  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<grpc::ClientContext*, std::shared_ptr<void>> calls_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_CALL_TRACKER_H_
