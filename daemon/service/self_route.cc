#include "daemon/service/self_route.h"

#include "daemon/peer/descriptor_codec.h"

namespace rdmad::service {

void RouteToSelf(const DaemonIdentity& identity,
                 core::TransferRequest* request) {
  if (!request->remote_descriptor.empty()) {
    auto descriptor = peer::DecodeDescriptor(request->remote_descriptor);
    if (!descriptor.ok() || descriptor->incarnation() != identity.incarnation ||
        descriptor->region_id() == 0) {
      return;
    }
    // A peer given with it must agree (the peer layer says so otherwise).
    if (!request->peer.empty() && request->peer != descriptor->peer()) return;
    request->remote_id = descriptor->region_id();
    request->remote_key = descriptor->tcp_key();
    request->remote_descriptor.clear();
    request->remote_name.clear();
    request->peer.clear();
  }
}

}  // namespace rdmad::service
