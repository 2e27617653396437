// TcpDataServer: the serving side of rdmad's TCP data channel.
//
// Listens on --data_listen and answers WRITE and READ frames (see wire.h)
// from other daemons against this daemon's exported regions. It enforces
// exactly what a NIC enforces for an rkey, per request:
//   - the region exists and is exported            else NOT_FOUND
//   - the key equals the region's current TCP key  else PERMISSION_DENIED
//   - [offset, offset+length) lies inside it       else OUT_OF_RANGE
//   - the export grants the access (w / r)         else PERMISSION_DENIED
// A rejected request never touches memory; the connection survives (the
// payload of a rejected WRITE is read and dropped). Bytes move directly
// between the socket and the shared-memory region (readv into it, sendmsg
// from it) with no intermediate copy, and the region is held
// (shared_ptr) for the duration of each I/O so a concurrent FreeRegion
// cannot unmap it underneath.
//
// Threads: a small fixed number of event loops (epoll, nonblocking
// sockets); each connection lives on one loop. Stop() ends them all.
//
// Example:
//   TcpDataServerOptions options;
//   options.listen = "127.0.0.1:0";
//   RDMAD_ASSIGN_OR_RETURN(auto server, TcpDataServer::Start(&regions, options));
//   ... peers connect to server->address() ...
//   server->Stop();
#ifndef RDMAD_DAEMON_TRANSPORT_TCP_DATA_SERVER_H_
#define RDMAD_DAEMON_TRANSPORT_TCP_DATA_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/peer_allow_list.h"
#include "daemon/core/region.h"
#include "daemon/core/region_table.h"
#include "daemon/transport/tcp/socket_util.h"
#include "daemon/transport/tcp/wire.h"
#include "daemon/transport/transport.h"

namespace rdmad::tcp {

struct TcpDataServerOptions {
  // HOST:PORT to listen on; port 0 picks a free port.
  std::string listen = "127.0.0.1:0";
  // Host peers are told to connect to (Peer.Connect). Empty: the listen
  // host, or, for a wildcard listen address, nothing, which tells peers to
  // use the host they reached this daemon's Peer service at.
  std::string advertise_host;
  // Event loop threads.
  int threads = 2;
  SocketTuning tuning;
  // Most data connections one peer is granted in Peer.Connect.
  uint32_t max_connections_per_peer = 16;
  // A connection stops reading requests while more READ payload than this
  // waits to be sent on it, so a peer cannot make the daemon queue without
  // bound.
  uint64_t max_queued_reply_bytes = 64ull << 20;
  // Peers allowed to connect (config peer_allow); others are closed at
  // accept, before a byte is read. Empty: everyone.
  core::PeerAllowList allow;
  // Most data connections open at once, from all peers together; more are
  // closed at accept, so that a peer cannot exhaust the daemon's file
  // descriptors. (Approximate with several event loops.)
  uint32_t max_open_connections = 1024;
};

// Checks one request against the region table as the server does; returns
// the region to do the I/O on. Exposed for tests.
absl::StatusOr<std::shared_ptr<core::Region>> CheckRequest(
    const core::RegionTable& regions, const FrameHeader& request);

class TcpDataServer final : public transport::ConnectAcceptor {
 public:
  struct Stats {
    uint64_t connections_accepted = 0;
    uint64_t connections_open = 0;
    uint64_t requests = 0;
    uint64_t rejected = 0;       // requests answered with an error
    uint64_t bytes_written = 0;  // into local regions by peers' WRITEs
    uint64_t bytes_read = 0;     // out of local regions by peers' READs
    uint64_t protocol_errors = 0;  // connections closed for garbage
    // Connections closed at accept: not in peer_allow, or over
    // max_open_connections.
    uint64_t refused = 0;
  };

  // `regions` is not owned and must outlive the server.
  static absl::StatusOr<std::unique_ptr<TcpDataServer>> Start(
      const core::RegionTable* regions, TcpDataServerOptions options);

  // Stops if still running.
  ~TcpDataServer() override;

  // Closes the listener and every connection and joins the threads.
  // In-flight requests are dropped (their peers see the connection close).
  // Idempotent.
  void Stop();

  // The bound address, "HOST:PORT" (with the real port).
  const std::string& address() const { return address_; }
  uint16_t port() const { return port_; }

  // transport::ConnectAcceptor: tells a peer where to connect.
  v1::TransportKind kind() const override { return v1::TRANSPORT_TCP; }
  absl::Status Accept(const v1::ConnectRequest& request,
                      v1::ConnectResponse* response) override;

  Stats stats() const;

 private:
  class Worker;
  struct Counters {
    std::atomic<uint64_t> connections_accepted{0};
    std::atomic<uint64_t> connections_open{0};
    std::atomic<uint64_t> requests{0};
    std::atomic<uint64_t> rejected{0};
    std::atomic<uint64_t> bytes_written{0};
    std::atomic<uint64_t> bytes_read{0};
    std::atomic<uint64_t> protocol_errors{0};
    std::atomic<uint64_t> refused{0};
  };

  TcpDataServer(const core::RegionTable* regions, TcpDataServerOptions options);

  const core::RegionTable* const regions_;  // Not owned.
  const TcpDataServerOptions options_;
  std::string address_;
  std::string advertise_host_;
  uint16_t port_ = 0;
  Counters counters_;
  std::vector<std::unique_ptr<Worker>> workers_;
  bool stopped_ = false;
};

}  // namespace rdmad::tcp

#endif  // RDMAD_DAEMON_TRANSPORT_TCP_DATA_SERVER_H_
