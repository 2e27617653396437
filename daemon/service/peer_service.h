// PeerService: rdmad.v1.Peer, served on TCP to other rdmad daemons.
#ifndef RDMAD_DAEMON_SERVICE_PEER_SERVICE_H_
#define RDMAD_DAEMON_SERVICE_PEER_SERVICE_H_

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
  // PERMISSION_DENIED unless the caller's address is in peer_allow.
  absl::Status CheckPeer(grpc::CallbackServerContext* context) const;

  const DaemonState* const state_;  // Not owned.
};

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_PEER_SERVICE_H_
