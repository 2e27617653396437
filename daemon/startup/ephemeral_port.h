// A listener on an ephemeral port that avoids the ports the daemon is
// configured to listen on next.
//
// The data listener binds port 0 before the Peer server binds its fixed
// --peer_listen port. A restart that keeps a peer port from the ephemeral
// range, freed a moment before by the daemon it replaces, can be handed
// that very port for its data listener, and then fails to listen for
// peers on a port it holds itself. StartAvoidingPorts starts again while
// the port is one to avoid, keeping the refused listeners open meanwhile
// so that the kernel hands out other ports.
//
// Example:
//   auto server = StartAvoidingPorts<tcp::TcpDataServer>(
//       [&] { return tcp::TcpDataServer::Start(regions, options, runtime); },
//       {7471});
#ifndef RDMAD_DAEMON_STARTUP_EPHEMERAL_PORT_H_
#define RDMAD_DAEMON_STARTUP_EPHEMERAL_PORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace rdmad::startup {

inline constexpr size_t kEphemeralPortAttempts = 8;

// Calls `start` until the listener it returns (`Server::port()`) is on a
// port not in `avoid`, at most `attempts` times; the last one is returned
// whatever its port (then the later listener reports the clash). An error
// of `start` is returned as is.
template <typename Server>
absl::StatusOr<std::unique_ptr<Server>> StartAvoidingPorts(
    absl::FunctionRef<absl::StatusOr<std::unique_ptr<Server>>()> start,
    const absl::flat_hash_set<uint16_t>& avoid,
    size_t attempts = kEphemeralPortAttempts) {
  std::vector<std::unique_ptr<Server>> refused;  // held until we return
  for (size_t i = 1;; ++i) {
    absl::StatusOr<std::unique_ptr<Server>> server = start();
    if (!server.ok()) return server.status();
    if (!avoid.contains((*server)->port()) || i >= attempts) return server;
    refused.push_back(*std::move(server));
  }
}

}  // namespace rdmad::startup

#endif  // RDMAD_DAEMON_STARTUP_EPHEMERAL_PORT_H_
