// GrpcPeerConnector: the PeerConnector of a running daemon. It keeps one
// gRPC channel per peer address to the peer's Peer service, and builds data
// channels with the transports' Connectors (Peer.Connect carries their
// parameters).
//
// Example:
//   GrpcPeerConnectorOptions options;
//   options.incarnation = id.incarnation;
//   options.offered = transport::OfferedTransports(local);
//   GrpcPeerConnector connector(options, std::move(connectors));
//   connector.SetSelfAddress("10.0.0.1:7471");
#ifndef RDMAD_DAEMON_PEER_GRPC_PEER_CONNECTOR_H_
#define RDMAD_DAEMON_PEER_GRPC_PEER_CONNECTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/peer/call_tracker.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/transport/transport.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace grpc {
class ChannelCredentials;
}  // namespace grpc

namespace rdmad::peer {

struct GrpcPeerConnectorOptions {
  std::string version;
  uint64_t incarnation = 0;  // this daemon's
  // Transports this daemon offers in Hello, best first.
  std::vector<core::TransportKind> offered = {core::TransportKind::kTcp};
  // This daemon's RDMA ports, sent in Hello (verbs).
  std::vector<v1::FabricEndpoint> endpoints;
  // Deadline of each Hello/Connect/Resolve call. Transfers waiting on one
  // still fail at their own deadlines; this only bounds the call. Generous,
  // because a first connection can be slow on a loaded node (seen: over 5 s
  // in the emulated lab VM while the host was busy), and a call that times
  // out is work thrown away.
  absl::Duration rpc_timeout = absl::Seconds(20);
  // A channel with no call for this long closes its connection (gRPC's
  // client idle timeout, at least 1 s); the next call reopens it. Data
  // channels are apart: an idle peer costs its data connection only.
  absl::Duration idle_timeout = absl::Seconds(10);
  // Credentials for channels to peers' Peer services: null = insecure;
  // grpc::SslCredentials with this daemon's certificate for mutual TLS.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
};

class GrpcPeerConnector final : public PeerConnector {
 public:
  // `connectors`: one per transport kind this daemon can connect with;
  // each is given a ConnectSender that reaches the peers through this
  // connector until Shutdown (then it answers UNAVAILABLE).
  GrpcPeerConnector(GrpcPeerConnectorOptions options,
                    std::vector<std::unique_ptr<transport::Connector>> connectors);
  ~GrpcPeerConnector() override;  // Shutdown()

  // This daemon's own Peer address, sent in Hello/Connect. Known only once
  // the Peer server is bound, so set after construction.
  void SetSelfAddress(std::string address);

  bool CanUse(core::TransportKind kind, std::string* why) const override;
  void Hello(const std::string& address, Handshake handshake,
             Callback<HelloReply> done) override;
  void Connect(const std::string& address, core::TransportKind kind,
               uint64_t incarnation,
               Callback<std::shared_ptr<transport::DataChannel>> done) override;
  void Resolve(const std::string& address, const std::string& name,
               uint32_t uid, Callback<core::RemoteRegionInfo> done) override;
  void Forget(const std::string& address) override;

  // Cancels the calls still out and waits for their callbacks; later calls
  // fail UNAVAILABLE at once. Idempotent.
  void Shutdown();

 private:
  // What the transports' ConnectSenders call: this connector, until
  // Shutdown clears it.
  struct SenderTarget {
    absl::Mutex mu;
    GrpcPeerConnector* connector ABSL_GUARDED_BY(mu) = nullptr;
  };

  // Peer.Connect of a request a transport built (transport::ConnectSender).
  void SendConnect(const std::string& address, v1::ConnectRequest request,
                   transport::ConnectDone done);
  std::shared_ptr<v1::Peer::Stub> StubFor(const std::string& address);
  transport::Connector* FindConnector(core::TransportKind kind) const;
  std::string self_address() const;

  const GrpcPeerConnectorOptions options_;
  const std::vector<std::unique_ptr<transport::Connector>> connectors_;
  CallTracker calls_;
  const std::shared_ptr<SenderTarget> sender_target_ =
      std::make_shared<SenderTarget>();

  mutable absl::Mutex mu_;
  // Increases with every Connect, so that a stale answer can never
  // configure a newer pool (see transport/handshake.h).
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::string self_address_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<v1::Peer::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

// A failed Peer-service call as a status naming the peer: failures to
// reach it at all (UNAVAILABLE, a call that timed out, a call cancelled by
// shutdown) become UNAVAILABLE; its answers keep their codes (INTERNAL,
// UNIMPLEMENTED... are not connection problems, and retrying them would
// only repeat them).
absl::Status FromPeerCall(const grpc::Status& status, const std::string& peer,
                          absl::string_view call);

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_GRPC_PEER_CONNECTOR_H_
