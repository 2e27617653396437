// SessionServer: accepts clients on the session socket, opens a session per
// connection with the credentials the kernel reports (SO_PEERCRED), serves
// descriptor requests (SCM_RIGHTS), and frees a session's buffers the moment
// its connection closes — which the kernel does when the process dies.
#ifndef RDMAD_DAEMON_SERVICE_SESSION_SERVER_H_
#define RDMAD_DAEMON_SERVICE_SESSION_SERVER_H_

#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/session_wire.h"
#include "common/unique_fd.h"
#include "daemon/core/region_table.h"
#include "daemon/core/session_table.h"
#include "daemon/ring/queue_registry.h"
#include "daemon/service/accept_backoff.h"

namespace rdmad::service {

class SessionServer {
 public:
  // Most memfds a session may have passed but not yet registered: each one
  // holds a descriptor in the daemon.
  static constexpr size_t kMaxPendingFds = 16;

  // `sessions` and `regions` are not owned and must outlive the server.
  SessionServer(std::string path, core::SessionTable* sessions,
                core::RegionTable* regions);
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
  };

  void Loop();
  void Accept();
  // Returns false when the connection must be closed.
  bool Serve(Connection& connection);
  void Close(int fd);

  const std::string path_;
  core::SessionTable* const sessions_;  // Not owned.
  core::RegionTable* const regions_;    // Not owned.
  ring::QueueRegistry* queues_ = nullptr;  // Not owned; may be null.

  UniqueFd listen_fd_;
  UniqueFd wake_fd_;  // eventfd that tells the loop to stop
  std::thread thread_;

  // Only the loop thread touches connections_ and backoff_.
  absl::flat_hash_map<int, Connection> connections_;
  AcceptBackoff backoff_;

  absl::Mutex mu_;
  uint64_t next_fd_token_ ABSL_GUARDED_BY(mu_) = 1;
  // session id -> token -> passed memfd
  absl::flat_hash_map<uint64_t, absl::flat_hash_map<uint64_t, UniqueFd>>
      passed_fds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_SESSION_SERVER_H_
