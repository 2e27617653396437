// Unix socket files: claim a path for a listener safely.
#ifndef RDMAD_DAEMON_LOCAL_SOCKET_UNIX_LISTENER_H_
#define RDMAD_DAEMON_LOCAL_SOCKET_UNIX_LISTENER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace rdmad::local_socket {

// Makes `path` free for a new listener: creates its parent directory if
// missing, removes a stale socket file left by a dead daemon, and refuses
// (FAILED_PRECONDITION) when a live process still accepts on it or the path
// is not a socket — two daemons must never share a socket.
absl::Status ClaimSocketPath(const std::string& path);

// Claims `path`, then binds and listens a Unix socket of `type`
// (SOCK_STREAM or SOCK_SEQPACKET) with file mode `mode`.
absl::StatusOr<UniqueFd> ListenUnix(const std::string& path, int type,
                                    uint32_t mode);

}  // namespace rdmad::local_socket

#endif  // RDMAD_DAEMON_LOCAL_SOCKET_UNIX_LISTENER_H_
