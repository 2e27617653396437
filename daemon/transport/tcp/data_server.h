// TcpDataServer: the serving side of rdmad's TCP data channel.
//
// Listens on --data_listen and answers WRITE and READ frames (see wire.h)
// from other daemons against this daemon's exported regions, checking each
// request exactly as a NIC checks an rkey (CheckRequest in
// data_connection.h). A rejected request never touches memory; the
// connection survives. Bytes move directly between the socket and the
// shared-memory region with no intermediate copy, and the region is held
// (shared_ptr) for the duration of each I/O so a concurrent FreeRegion
// cannot unmap it underneath.
//
// Threads: none of its own. The listener and the connections live on the
// IoRuntime's serving loops (those that are not engine loops, or all when
// every loop is one), connections spread round-robin.
//
// Example:
//   TcpDataServerOptions options;
//   options.listen = "127.0.0.1:0";
//   RDMAD_ASSIGN_OR_RETURN(auto server,
//                          TcpDataServer::Start(&regions, options, runtime));
//   ... peers connect to server->address() ...
//   server->Stop();
#ifndef RDMAD_DAEMON_TRANSPORT_TCP_DATA_SERVER_H_
#define RDMAD_DAEMON_TRANSPORT_TCP_DATA_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/core/notification_sink.h"
#include "daemon/core/peer_allow_list.h"
#include "daemon/core/region_table.h"
#include "daemon/runtime/accept_backoff.h"
#include "daemon/runtime/io_runtime.h"
#include "daemon/transport/tcp/address_slots.h"
#include "daemon/transport/tcp/data_connection.h"
#include "daemon/transport/tcp/socket_util.h"
#include "daemon/transport/transport.h"

namespace rdmad::tcp {

struct TcpDataServerOptions {
  // HOST:PORT to listen on; port 0 picks a free port.
  std::string listen = "127.0.0.1:0";
  // Host peers are told to connect to (Peer.Connect). Empty: the listen
  // host, or, for a wildcard listen address, nothing, which tells peers to
  // use the host they reached this daemon's Peer service at.
  std::string advertise_host;
  SocketTuning tuning;
  // Most data connections one peer is granted in Peer.Connect.
  uint32_t max_connections_per_peer = 16;
  // A connection stops reading requests while more READ payload than this
  // waits to be sent on it, so a peer cannot make the daemon queue without
  // bound.
  uint64_t max_queued_reply_bytes = 64ull << 20;
  // It also stops reading while the replies waiting on it hold more than
  // this much of the daemon's memory (each its bookkeeping and error
  // message, whatever its payload): a peer that sends small requests and
  // never reads the answers would otherwise make every 48-byte request cost
  // up to a kilobyte of heap, without bound.
  uint64_t max_queued_reply_memory = 256ull << 10;
  // Peers allowed to connect (config peer_allow); others are closed at
  // accept, before a byte is read. Empty: everyone.
  core::PeerAllowList allow;
  // Most data connections open at once, from all peers together; more are
  // closed at accept, so that a peer cannot exhaust the daemon's file
  // descriptors.
  uint32_t max_open_connections = 1024;
  // Most data connections open at once from one source address; more from
  // it are closed at accept, so that one address cannot hold every slot
  // (address_slots.h). 0: no cap. Loopback sources are not capped unless
  // cap_loopback: daemons sharing one host (a test, a lab, 32 peers in
  // DaemonThreadsTest) all connect from it, and a process on this host has
  // other ways to use up the daemon's descriptors; max_open_connections
  // still bounds them. (Tests set cap_loopback: loopback is all they use.)
  uint32_t max_connections_per_address = 64;
  bool cap_loopback = false;
  // A connection with something under way (no request received yet, a
  // request half received, or replies not all sent) that moves no byte
  // either way for this long is closed: connections that never complete a
  // frame, or never send one, cannot hold the slots above for good. One
  // idle between requests stays open (peers keep theirs for the next
  // transfer). Zero: never.
  absl::Duration stall_timeout = absl::Seconds(30);
  // Told of every WRITE_IMM that landed (not owned; null: nobody).
  core::NotificationSink* notifications = nullptr;
};

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
    // max_open_connections or max_connections_per_address.
    uint64_t refused = 0;
    // Connections closed for moving nothing while under way (stall_timeout).
    uint64_t stalled = 0;
  };

  // `regions` and `runtime` are not owned and must outlive the server.
  static absl::StatusOr<std::unique_ptr<TcpDataServer>> Start(
      const core::RegionTable* regions, TcpDataServerOptions options,
      runtime::IoRuntime* runtime);

  // Stops if still running.
  ~TcpDataServer() override;

  // Closes the listener and every connection (their peers see the
  // connection close; in-flight requests are dropped) and waits until the
  // loops have let go of them. Idempotent; not from one of the loops.
  void Stop();

  // The bound address, "HOST:PORT" (with the real port).
  const std::string& address() const { return address_; }
  uint16_t port() const { return port_; }

  // transport::ConnectAcceptor: tells a peer where to connect.
  core::TransportKind kind() const override {
    return core::TransportKind::kTcp;
  }
  absl::Status Accept(const v1::ConnectRequest& request,
                      const std::string& caller,
                      v1::ConnectResponse* response) override;

  Stats stats() const;

 private:
  // A connection and its source address's slot, returned with it.
  struct Held {
    std::unique_ptr<DataConnection> connection;
    AddressSlots::Slot slot;
  };
  // The connections living on one loop; touched only on that loop.
  struct Shard {
    runtime::EventLoop* loop = nullptr;
    absl::flat_hash_map<DataConnection*, Held> connections;
  };

  TcpDataServer(const core::RegionTable* regions, TcpDataServerOptions options);
  void OnListenerReadable();
  void Refuse(int fd, absl::string_view why);
  void PauseAccepting();
  static void AddConnection(Shard* shard, const DataServerContext* context,
                            UniqueFd fd, AddressSlots::Slot slot);

  const core::RegionTable* const regions_;  // Not owned.
  const TcpDataServerOptions options_;
  DataServerCounters counters_;
  AddressSlots slots_;
  DataServerContext context_;
  std::string address_;
  std::string advertise_host_;
  uint16_t port_ = 0;
  // The listener lives on shards_[0]'s loop.
  UniqueFd listener_;
  uint64_t listener_watch_ = 0;
  uint64_t resume_timer_ = 0;  // accepting paused until it fires
  runtime::AcceptBackoff backoff_;  // listener loop only
  std::vector<std::unique_ptr<Shard>> shards_;
  size_t next_shard_ = 0;  // listener loop only
  std::atomic<bool> stopped_{false};
};

}  // namespace rdmad::tcp

#endif  // RDMAD_DAEMON_TRANSPORT_TCP_DATA_SERVER_H_
