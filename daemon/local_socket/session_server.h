// SessionServer: accepts clients on the session socket, opens a session per
// connection with the credentials the kernel reports (SO_PEERCRED), serves
// descriptor requests (SCM_RIGHTS), and frees a session's buffers the moment
// its connection closes — which the kernel does when the process dies.
#ifndef RDMAD_DAEMON_LOCAL_SOCKET_SESSION_SERVER_H_
#define RDMAD_DAEMON_LOCAL_SOCKET_SESSION_SERVER_H_

#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/session_wire.h"
#include "common/unique_fd.h"
#include "daemon/core/region_table.h"
#include "daemon/core/session_table.h"
#include "daemon/ring/queue_registry.h"
#include "daemon/runtime/accept_backoff.h"

namespace rdmad::local_socket {

// Bounds on what sessions may make the daemon hold in descriptors. Each
// session is a socket in the daemon; each memfd a client passed and has not
// registered yet is one more; and each region descriptor the daemon sent
// (SCM_RIGHTS) that the client has not received yet is "in flight": the
// kernel charges it to the daemon's user, and once those exceed the
// daemon's RLIMIT_NOFILE every sendmsg with a descriptor fails
// (ETOOMANYREFS), for every session. SessionLimits::ForFileLimit derives
// the defaults from that limit.
struct SessionLimits {
  size_t max_sessions_per_uid = 128;
  // Descriptors in flight: a session that goes over its own bound, or over
  // its uid's, is ended (its buffers freed, its token revoked) and told so.
  size_t max_fds_in_flight_per_session = 16;
  size_t max_fds_in_flight_per_uid = 64;
  // All sessions together: over it, a request for a descriptor is refused
  // with RESOURCE_EXHAUSTED (no session is ended: whose fault is unclear).
  size_t max_fds_in_flight_total = 512;
  // Passed, not yet registered memfds.
  size_t max_pending_fds_per_session = 16;
  size_t max_pending_fds_per_uid = 64;

  static SessionLimits ForFileLimit(uint64_t nofile);
};

class SessionServer {
 public:
  // `sessions` and `regions` are not owned and must outlive the server.
  SessionServer(std::string path, core::SessionTable* sessions,
                core::RegionTable* regions, SessionLimits limits = {});
  ~SessionServer();

  // Binds the socket (replacing a stale file, refusing a live one), sets its
  // mode, and starts the event loop thread.
  absl::Status Start(uint32_t socket_mode);

  // Serves queue descriptors from `queues` and ends a session's queues with
  // it (not owned; null: none). Set before Start.
  void SetQueues(ring::QueueRegistry* queues) { queues_ = queues; }

  // Stops the loop, ends every session (freeing their buffers) and removes
  // the socket file. Idempotent.
  void Stop();

  // Takes the memfd a session passed with kPassFd under `token`.
  absl::StatusOr<UniqueFd> TakePassedFd(uint64_t session_id, uint64_t token);

  const std::string& path() const { return path_; }

 private:
  // A descriptor of a region's memory to hand a client: the region's own
  // (read-write), or a read-only one opened for this reply (`owned`).
  struct MappableFd {
    int fd = -1;
    UniqueFd owned;
    bool writable = false;
  };
  static absl::StatusOr<MappableFd> RegionDescriptorFor(
      const core::Caller& caller, const core::Region& region);

  struct Connection {
    uint64_t session_id = 0;
    core::Caller caller;
    UniqueFd socket;
    // Region descriptors sent that the client may not have received yet
    // (an upper bound: reset once the socket's send queue is empty).
    size_t fds_in_flight = 0;
    // Ended for abuse: the session is gone, but the socket stays open (and
    // counted) until the client has taken or dropped what is in flight,
    // because the kernel keeps charging those to the daemon until then.
    bool ended = false;
  };

  void Loop();
  void Accept();
  // Returns false when the connection must be closed.
  bool Serve(Connection& connection);
  // A kGetFd request; false when the connection must be closed.
  bool SendRegionFd(Connection& connection, uint64_t region_id);
  // Sends `reply` with descriptor `attached`, within the limits on
  // descriptors in flight (a session over them is ended).
  bool SendFd(Connection& connection, const session_wire::Message& reply,
              int attached);
  // Ends the session of an abusive connection, telling it why, and keeps
  // the socket until what it has in flight is gone (see Connection).
  void EndForAbuse(Connection& connection, const absl::Status& why);
  // Ended connections whose send queue drained: close them.
  void ReapEnded();
  void Close(int fd);
  // Sum of fds_in_flight over all connections, and over those of `uid`.
  size_t FdsInFlight() const;
  size_t FdsInFlight(uint32_t uid) const;

  const std::string path_;
  core::SessionTable* const sessions_;  // Not owned.
  core::RegionTable* const regions_;    // Not owned.
  ring::QueueRegistry* queues_ = nullptr;  // Not owned; may be null.
  const SessionLimits limits_;

  UniqueFd listen_fd_;
  UniqueFd wake_fd_;  // eventfd that tells the loop to stop
  std::thread thread_;

  // Only the loop thread touches connections_ and backoff_.
  absl::flat_hash_map<int, Connection> connections_;
  runtime::AcceptBackoff backoff_;

  absl::Mutex mu_;
  uint64_t next_fd_token_ ABSL_GUARDED_BY(mu_) = 1;
  // session id -> token -> passed memfd
  absl::flat_hash_map<uint64_t, absl::flat_hash_map<uint64_t, UniqueFd>>
      passed_fds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::local_socket

#endif  // RDMAD_DAEMON_LOCAL_SOCKET_SESSION_SERVER_H_
