// The daemon's two gRPC servers, built the same way every time: the Peer
// service on TCP (mutual TLS when configured) and the Local service on its
// Unix socket (mode and group from the config). Both serve gRPC health
// checking and reflection.
#ifndef RDMAD_DAEMON_SERVERS_H_
#define RDMAD_DAEMON_SERVERS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/config/resolved_config.h"
#include "daemon/local_socket/local_listener.h"
#include "daemon/service/call_tracker.h"
#include "grpcpp/grpcpp.h"

namespace rdmad {

// Enables health checking and reflection for every server built after.
void EnableServerPlugins();

struct StartedServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // TCP servers: the port bound
};

// The Peer service on `listen` ("HOST:PORT"; port 0 picks one). Its calls
// are counted in `calls` (service/call_tracker.h).
absl::StatusOr<StartedServer> StartPeerServer(
    const std::string& listen, const std::optional<config::PeerTls>& tls,
    grpc::Service* service, std::shared_ptr<service::CallTracker::Counter> calls);

// The Local service: a gRPC server with no listening port of its own, fed
// by `listener` (which accepts on the Unix socket itself, to learn each
// connection's credentials) once LocalListener::Start(server, mode) runs;
// the socket file then goes to group `gid` (-1: unchanged). Calls are
// counted in `calls`.
absl::StatusOr<StartedServer> StartLocalServer(
    local_socket::LocalListener& listener, grpc::Service* service, uint32_t mode,
    int64_t gid, std::shared_ptr<service::CallTracker::Counter> calls);

// Credentials for this daemon's calls to peers: mutual TLS with its own
// certificate when configured, else insecure.
std::shared_ptr<grpc::ChannelCredentials> PeerChannelCredentials(
    const std::optional<config::PeerTls>& tls);

// Gives the socket file at `path` to group `gid` (-1: no change).
absl::Status ChownSocket(const std::string& path, int64_t gid);

}  // namespace rdmad

#endif  // RDMAD_DAEMON_SERVERS_H_
