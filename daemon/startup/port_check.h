// Taken ports at start: is a listen address free, and who holds it if not.
//
// gRPC's server sets SO_REUSEPORT on its listeners by default, so a second
// rdmad on a taken peer port used to start, report ready and get half the
// connections. The daemon now disables that (GRPC_ARG_ALLOW_REUSEPORT = 0)
// and checks every TCP listen address before it starts, so that a taken
// port stops it with a message naming the port and, where the system tells,
// the process that holds it (exit status 2: a restart cannot fix it).
//
// Example:
//   RDMAD_RETURN_IF_ERROR(CheckPortFree("peers", "--peer_listen",
//                                       "0.0.0.0:7471"));
#ifndef RDMAD_DAEMON_STARTUP_PORT_CHECK_H_
#define RDMAD_DAEMON_STARTUP_PORT_CHECK_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace rdmad::startup {

struct PortHolder {
  int pid = 0;
  std::string command;  // /proc/PID/comm, e.g. "rdmad"
};

// The process with a TCP socket listening on `port` (any address, IPv4 or
// IPv6), found through `proc_root`/net/tcp{,6} (the socket's inode) and
// `proc_root`/PID/fd (who holds it). nullopt when nothing listens there or
// the holder cannot be seen (another user's process, without root).
std::optional<PortHolder> FindPortHolder(uint16_t port,
                                         const std::string& proc_root = "/proc");

// OK if `listen` ("HOST:PORT"; port 0 is always free) can be bound now;
// otherwise ALREADY_EXISTS: "cannot listen on HOST:PORT for `what`
// (`setting`): the port is in use by pid N (rdmad): ...". Other bind
// errors are left to the server that binds for real (OK here).
absl::Status CheckPortFree(absl::string_view what, absl::string_view setting,
                           const std::string& listen);

// The status for a server that failed to bind `listen`: CheckPortFree's
// ALREADY_EXISTS when the port is taken, else UNAVAILABLE naming it.
absl::Status ListenFailure(absl::string_view what, absl::string_view setting,
                           const std::string& listen);

}  // namespace rdmad::startup

#endif  // RDMAD_DAEMON_STARTUP_PORT_CHECK_H_
