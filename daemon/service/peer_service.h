// PeerService: rdmad.v1.Peer, served on TCP to other rdmad daemons.
#ifndef RDMAD_DAEMON_SERVICE_PEER_SERVICE_H_
#define RDMAD_DAEMON_SERVICE_PEER_SERVICE_H_

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "daemon/service/daemon_state.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::service {

class PeerService final : public v1::Peer::CallbackService {
 public:
  // `state` is not owned and must outlive the service.
  explicit PeerService(const DaemonState* state) : state_(state) {}

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

  const DaemonState* const state_;  // Not owned.
};

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_PEER_SERVICE_H_
