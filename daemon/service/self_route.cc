#include "daemon/service/self_route.h"

#include "daemon/core/access_control.h"

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

core::RemoteAccess LocalAccessOf(const core::Caller& caller,
                                 const core::Region& region) {
  const bool read =
      core::CheckLocalAccess(caller, region.acl(), core::kLocalRead, "").ok();
  const bool write =
      core::CheckLocalAccess(caller, region.acl(), core::kLocalWrite, "").ok();
  if (read && write) return core::RemoteAccess::kReadWrite;
  if (read) return core::RemoteAccess::kRead;
  if (write) return core::RemoteAccess::kWrite;
  return core::RemoteAccess::kNone;
}

}  // namespace rdmad::service
