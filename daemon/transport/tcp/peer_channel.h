// TcpPeerChannel: the connecting side of rdmad's TCP data channel to one
// peer (transport::DataChannel over the frames of wire.h).
//
// A channel keeps up to several TCP connections to the peer's data
// listener (default 4), all driven by one event loop of the daemon's
// IoRuntime: the channel owns no thread, and no thread ever blocks per
// request. It opens the first on first use and another only when each one
// open has min_split_bytes waiting, so small operations share one. A posted
// operation is split into chunks (at most chunk_bytes each; large ones
// spread over the connections, least loaded first), many requests are in
// flight per connection, and replies may complete in any order. The frames
// of one Post (a batch) are queued together and written with as few
// sendmsg calls as the socket takes. WRITE payloads are sent straight from
// the local region and READ payloads received straight into it.
//
// Failures:
//   - an error reply fails the operation with the remote status (e.g.
//     PERMISSION_DENIED), naming the peer;
//   - op.deadline passing fails it with DEADLINE_EXCEEDED;
//   - a connection error (reset, refused, garbage from the peer, connect
//     timeout) fails the requests on that connection with UNAVAILABLE; the
//     connection is re-established on next use.
// Once an operation's callback has run, no byte is written into its local
// memory any more (late READ data is read and dropped).
//
// Example:
//   TcpChannelOptions options;
//   options.loop = runtime->Pick();
//   options.peer = "10.0.0.2:7471";
//   options.host = "10.0.0.2";
//   options.port = 7472;
//   RDMAD_ASSIGN_OR_RETURN(auto channel, TcpPeerChannel::Create(options));
//   channel->Post(absl::MakeSpan(ops));
#ifndef RDMAD_DAEMON_TRANSPORT_TCP_PEER_CHANNEL_H_
#define RDMAD_DAEMON_TRANSPORT_TCP_PEER_CHANNEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/runtime/event_loop.h"
#include "daemon/runtime/io_runtime.h"
#include "daemon/transport/tcp/socket_util.h"
#include "daemon/transport/transport.h"

namespace rdmad::tcp {

struct TcpChannelOptions {
  // The loop the channel's sockets live on. Not owned; must outlive the
  // channel's last operation (the daemon stops its runtime last).
  runtime::EventLoop* loop = nullptr;
  std::string peer;  // the peer's Peer-service address, for messages
  std::string host;  // its data listener
  uint16_t port = 0;
  int connections = 4;
  // Largest request; bigger operations are split.
  uint64_t chunk_bytes = 4ull << 20;
  // Operations of at least twice this size are split over several
  // connections even when smaller than chunk_bytes, so that both ends can
  // move them with more than one thread.
  uint64_t min_split_bytes = 512ull << 10;
  SocketTuning tuning;
  absl::Duration connect_timeout = absl::Seconds(5);
  // This daemon's Peer address, sent first on each connection (an
  // IDENTIFY frame, wire.h) to a data listener that takes one, so that
  // the owners its WRITE_IMMs notify learn who wrote. Empty: none sent.
  std::string identity;
};

class TcpPeerChannel final : public transport::DataChannel {
 public:
  // Connections are opened on first use.
  static absl::StatusOr<std::unique_ptr<TcpPeerChannel>> Create(
      TcpChannelOptions options);
  ~TcpPeerChannel() override;  // Close()

  core::TransportKind kind() const override { return core::TransportKind::kTcp; }
  absl::StatusOr<transport::RemoteKey> KeyFor(
      const core::RemoteRegionInfo& region) const override;
  void Post(absl::Span<transport::RemoteOp> ops) override;
  transport::ChannelInfo Describe() const override;
  void Close() override;

 private:
  class Impl;
  explicit TcpPeerChannel(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

// transport::Connector for TCP: asks the peer for its data endpoint in
// Peer.Connect and builds a TcpPeerChannel to it.
class TcpConnector final : public transport::Connector {
 public:
  // `defaults` supplies everything but peer, host, port and loop; each
  // channel goes on the next loop of `runtime` (not owned).
  TcpConnector(TcpChannelOptions defaults, runtime::IoRuntime* runtime)
      : defaults_(std::move(defaults)), runtime_(runtime) {}

  core::TransportKind kind() const override { return core::TransportKind::kTcp; }
  bool Usable(std::string*) const override { return true; }
  absl::StatusOr<std::unique_ptr<Pending>> Prepare(
      const std::string& peer, v1::ConnectRequest* request) override;

 private:
  const TcpChannelOptions defaults_;
  runtime::IoRuntime* const runtime_;  // Not owned.
};

}  // namespace rdmad::tcp

#endif  // RDMAD_DAEMON_TRANSPORT_TCP_PEER_CHANNEL_H_
