// SessionLink: a client's session with its daemon, and how it survives a
// daemon restart.
//
// A session is a connection on the daemon's session socket (the daemon
// learns the client's uid/gid/pid there from the kernel, and passes region
// descriptors over it) plus the token that authenticates the client's gRPC
// calls. When rdmad exits, the kernel closes its end of that socket. Before
// each call, Prepare() checks for that (one poll(2), no round trip) and, if
// so, opens a new session and a new gRPC channel, and bumps generation():
// everything the old session owned is gone from the daemon, and ids and
// tokens of the old session mean nothing (or something else) to the new
// daemon, so callers compare generations before using one.
//
// Example:
//   auto link = SessionLink::Open(options);
//   grpc::ClientContext context;
//   auto call = (*link)->Prepare(context);   // deadline + token set
//   if (!call.ok()) return call.status();
//   call->stub->GetStatus(&context, request, &response);
//
// A session belongs to the process that opened it: in a child that process
// forked, the socket, the gRPC channel and the queues' shared memory are
// the parent's, still in use by the parent. There every call fails
// FAILED_PRECONDITION (Forked) and nothing is freed or closed in the daemon
// on the parent's behalf.
//
// Thread-safe.
#ifndef RDMAD_CLIENT_SESSION_LINK_H_
#define RDMAD_CLIENT_SESSION_LINK_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/session_wire.h"
#include "common/unique_fd.h"
#include "grpcpp/client_context.h"
#include "rdmad/client.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::client_internal {

class SessionLink {
 public:
  // Connects to the daemon at options.socket_path and opens a session.
  // UNAVAILABLE naming the socket when no daemon answers there.
  static absl::StatusOr<std::unique_ptr<SessionLink>> Open(
      ClientOptions options);
  // In a forked child, leaves the gRPC channel alone (see session_link.cc),
  // and takes no lock: one the parent held at the fork stays held here.
  ~SessionLink() ABSL_NO_THREAD_SAFETY_ANALYSIS;

  // What one gRPC call uses: the stub of the current session's channel and
  // that session's generation.
  struct Call {
    std::shared_ptr<v1::Local::Stub> stub;
    uint64_t generation = 0;
  };

  // Opens a new session first if the daemon closed the current one, then
  // gives `context` the call's deadline and the session token.
  absl::StatusOr<Call> Prepare(grpc::ClientContext& context)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Like Prepare, but only for session `generation` and never opening a new
  // one: FAILED_PRECONDITION when that session is over (the daemon closed
  // it, or a newer one replaced it). For calls that name the session's own
  // objects by id (freeing a buffer, closing a queue), which in another
  // session may name something else.
  absl::StatusOr<Call> PrepareIn(grpc::ClientContext& context,
                                 uint64_t generation) ABSL_LOCKS_EXCLUDED(mu_);

  // Opens a new session if the daemon closed the current one (as Prepare
  // does, for work that makes no gRPC call itself, such as the queue
  // behind Client::Write); returns the generation now in use.
  absl::StatusOr<uint64_t> Refresh() ABSL_LOCKS_EXCLUDED(mu_);

  // True if the daemon closed the current session (it stopped or
  // restarted). One poll(2); never reconnects.
  bool DaemonClosed() const ABSL_LOCKS_EXCLUDED(mu_);

  // Sends `request` on the session socket (with `fd_to_send` attached when
  // >= 0) and waits for its reply, which must belong to session
  // `generation`: FAILED_PRECONDITION if the session changed since (an id
  // from the old one would name something else now). Never reconnects.
  absl::StatusOr<session_wire::Message> Ask(
      const session_wire::Message& request, int fd_to_send,
      uint64_t generation) ABSL_LOCKS_EXCLUDED(mu_);

  // True in a child of the process that opened this link (after fork()).
  // One relaxed load: the queue's hot path asks it.
  bool Forked() const;
  // FAILED_PRECONDITION saying that this is a forked child and what to do.
  absl::Status ForkedError() const;

  // 1 for the first session, +1 for each one opened after a restart.
  // Lock-free: the queue's hot path compares it.
  uint64_t generation() const {
    return generation_.load(std::memory_order_acquire);
  }
  uint64_t session_id() const ABSL_LOCKS_EXCLUDED(mu_);
  const ClientOptions& options() const { return options_; }

  // The time left for one call: options.timeout from now, but never past
  // options.deadline.
  absl::Duration CallBudget() const;

 private:
  explicit SessionLink(ClientOptions options);
  // Connects the session socket, reads the greeting and makes a channel.
  absl::Status OpenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True if the daemon closed its end of the session socket.
  bool ClosedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens a new session if ClosedLocked(); the error says why not.
  absl::Status ReopenIfClosedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClientOptions options_;
  // The process that opened the link, and the count of forks
  // (ForkCount in session_link.cc) then.
  const pid_t pid_;
  const uint64_t forks_;
  mutable absl::Mutex mu_;  // also: one request on the socket at a time
  UniqueFd socket_ ABSL_GUARDED_BY(mu_);
  uint64_t session_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::string token_ ABSL_GUARDED_BY(mu_);
  // Written under mu_ (with the session it counts), read without.
  std::atomic<uint64_t> generation_{0};
  std::shared_ptr<v1::Local::Stub> stub_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::client_internal

#endif  // RDMAD_CLIENT_SESSION_LINK_H_
