// PeerService: rdmad.v1.Peer, served on TCP to other rdmad daemons.
#ifndef RDMAD_DAEMON_SERVICE_PEER_SERVICE_H_
#define RDMAD_DAEMON_SERVICE_PEER_SERVICE_H_

#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "daemon/core/device_info.h"
#include "daemon/core/peer_allow_list.h"
#include "daemon/core/region_table.h"
#include "daemon/peer/handshake_admission.h"
#include "daemon/service/daemon_identity.h"
#include "daemon/transport/transport.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::service {

// What the Peer service calls, and nothing more. Pointers are not owned;
// all outlive the service. The daemon passes its own objects; tests pass
// in-memory ones (a RegionTable over a NullRegistrar, fake acceptors).
struct PeerServiceDeps {
  // Version, incarnation and transport for Hello, Connect and descriptors.
  // Read at each call: the daemon fills in its listening addresses after
  // the service is built.
  const DaemonIdentity* identity = nullptr;
  // The fabric endpoints Hello lists; none on TCP.
  const std::vector<core::DeviceInfo>* devices = nullptr;
  // Peers allowed on the Peer service (config peer_allow); empty: all.
  const core::PeerAllowList* peer_allow = nullptr;
  // The exports Resolve and ListExports read.
  const core::RegionTable* regions = nullptr;
  // Answer Connect for each transport kind; null if not available.
  transport::ConnectAcceptor* tcp_acceptor = nullptr;
  transport::ConnectAcceptor* verbs_acceptor = nullptr;
  // Bounds the handshakes served at once (Hello's proposals and names,
  // Connect); null: no bound.
  peer::HandshakeAdmission* handshakes = nullptr;
};

// Thread-safe: calls read `deps` only, and each call's work is its own.
class PeerService final : public v1::Peer::CallbackService {
 public:
  // Every pointer of `deps` but the acceptors and `handshakes` is required.
  explicit PeerService(PeerServiceDeps deps) : deps_(deps) {}

  grpc::ServerUnaryReactor* Hello(grpc::CallbackServerContext* context,
                                  const v1::HelloRequest* request,
                                  v1::HelloResponse* response) override;
  grpc::ServerUnaryReactor* Connect(grpc::CallbackServerContext* context,
                                    const v1::ConnectRequest* request,
                                    v1::ConnectResponse* response) override;
  grpc::ServerUnaryReactor* Resolve(grpc::CallbackServerContext* context,
                                    const v1::ResolveRequest* request,
                                    v1::ResolveResponse* response) override;
  grpc::ServerUnaryReactor* ListExports(
      grpc::CallbackServerContext* context,
      const v1::ListExportsRequest* request,
      v1::ListExportsResponse* response) override;

 private:
  // Most connect proposals one Hello may carry (verbs, then TCP).
  static constexpr int kMaxHelloProposals = 2;

  // PERMISSION_DENIED unless the caller's address is in peer_allow.
  absl::Status CheckPeer(grpc::CallbackServerContext* context) const;
  // Runs `work` when the serving side's handshake admission gives it its
  // turn, and finishes the call with its status; or tells the caller to
  // retry (RESOURCE_EXHAUSTED) when its turn would come too late.
  grpc::ServerUnaryReactor* Admitted(
      grpc::CallbackServerContext* context,
      absl::AnyInvocable<absl::Status()> work) const;
  // What Hello's proposals and names ask for, into `response`.
  void ServeHandshake(grpc::CallbackServerContext* context,
                      const v1::HelloRequest& request,
                      v1::HelloResponse* response) const;
  // Connect's checks and its transport's acceptor.
  absl::Status AcceptConnect(grpc::CallbackServerContext* context,
                             const v1::ConnectRequest& request,
                             v1::ConnectResponse* response) const;
  // Resolve's checks and descriptor.
  absl::Status ResolveFor(grpc::CallbackServerContext* context,
                          const v1::ResolveRequest& request,
                          v1::RegionDescriptor* out) const;
  // The acceptor of a v1::TransportKind; null when this daemon has none.
  transport::ConnectAcceptor* Acceptor(int transport) const;

  const PeerServiceDeps deps_;
};

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_PEER_SERVICE_H_
