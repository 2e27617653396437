// LocalListener: accepts the connections of the Local gRPC Unix socket
// itself and hands each one to the gRPC server (AddInsecureChannelFromFd),
// so that every Local call can be bound to the kernel-verified credentials
// of the connection it arrived on.
//
// Why: a session token alone is a bearer secret; whoever learns it could act
// as its session. With the connection's SO_PEERCRED known, a call is
// accepted only when the process that opened the session (pid and uid, on
// the session socket) is the process at the other end of the gRPC
// connection the call came in on (SessionTable::AuthenticateFrom).
//
// How a call finds its connection: gRPC names a connection it was given as
// a descriptor "fd:N" (ServerContext::peer()). Descriptor numbers are
// reused once closed, so the listener never hands gRPC a number that
// belonged to an earlier Local connection less than kReuseGrace ago: a
// call from a connection that has just gone can then only be matched with
// that connection's own credentials, never with a newer one's.
//
// Limits: at most `max_connections_per_uid` open Local connections per uid
// (more are closed at accept and logged); accept pauses briefly when the
// daemon is out of descriptors instead of spinning.
//
// Thread-safe: one accept thread; CredentialsOf from any thread.
#ifndef RDMAD_DAEMON_LOCAL_SOCKET_LOCAL_LISTENER_H_
#define RDMAD_DAEMON_LOCAL_SOCKET_LOCAL_LISTENER_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "daemon/runtime/accept_backoff.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace rdmad::local_socket {

// What the kernel reported for one Local connection (SO_PEERCRED).
struct ConnectionCredentials {
  int32_t pid = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
};

struct LocalListenerOptions {
  // Most Local connections one uid may have open at once.
  size_t max_connections_per_uid = 128;
  // How long a descriptor number of a closed connection is kept from new
  // connections (see above).
  absl::Duration reuse_grace = absl::Seconds(30);
};

class LocalListener {
 public:
  LocalListener(std::string path, LocalListenerOptions options = {});
  ~LocalListener();  // Stop()

  LocalListener(const LocalListener&) = delete;
  LocalListener& operator=(const LocalListener&) = delete;

  // Claims `path` (see unix_listener.h), listens with file mode `mode`, and
  // starts accepting into `server` (not owned; must outlive Stop()).
  absl::Status Start(grpc::Server* server, uint32_t mode);

  // Stops accepting, closes the listening socket and removes its file.
  // Connections already handed to gRPC are gRPC's. Idempotent.
  void Stop();

  // The credentials of the connection a call arrived on, from its gRPC peer
  // string ("fd:N"). UNAUTHENTICATED if no connection of this listener is
  // known by that name.
  absl::StatusOr<ConnectionCredentials> CredentialsOf(
      absl::string_view grpc_peer) const;

  const std::string& path() const { return path_; }

  // Open connections of `uid` as last seen (for tests and diagnostics).
  size_t OpenConnections(uint32_t uid) const;

 private:
  struct Entry {
    ConnectionCredentials credentials;
    ino_t inode = 0;  // identity of the socket behind the number (sockfs)
    bool alive = true;
    absl::Time closed;  // when noticed closed (alive == false)
  };

  void Loop();
  void Accept();
  // Marks entries whose number no longer holds their socket as closed and
  // forgets those closed for longer than reuse_grace.
  void Sweep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts a refused connection and logs the first and every 1000th.
  void Refuse(const ConnectionCredentials& who, absl::string_view why);

  const std::string path_;
  const LocalListenerOptions options_;
  grpc::Server* server_ = nullptr;  // Not owned.
  UniqueFd listen_fd_;
  UniqueFd wake_fd_;  // eventfd: tells the loop to stop
  std::thread thread_;
  runtime::AcceptBackoff backoff_;  // loop thread only
  uint64_t refused_ = 0;            // loop thread only

  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::local_socket

#endif  // RDMAD_DAEMON_LOCAL_SOCKET_LOCAL_LISTENER_H_
