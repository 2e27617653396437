#include "daemon/service/self_route.h"

namespace rdmad::service {

void RouteToSelf(const DaemonIdentity& identity, core::TransferTarget* target) {
  const core::RemoteRegionInfo* descriptor = target->descriptor.get();
  if (descriptor == nullptr || descriptor->incarnation != identity.incarnation ||
      descriptor->region_id == 0) {
    return;
  }
  target->self_region_id = descriptor->region_id;
  target->self_key = descriptor->tcp_key;
  target->descriptor.reset();
  target->name.clear();
  target->peer.clear();
}

}  // namespace rdmad::service
