// A transfer to a descriptor this daemon issued is served by the local copy
// path instead of a loopback through the peer layer: there the caller is
// known as the local user it is (uid, gid, groups), and the target's own
// permissions apply on top of its export (core::TransferEngine). (A
// descriptor carries its key, so a loopback would reach the data path with
// no further check of the caller.) A region named through this daemon's
// own Peer address does loop back, on purpose (rdmactl bench measures the
// transport that way): Peer.Resolve then narrows what it hands back to the
// same permissions (PeerService::Resolve).
#ifndef RDMAD_DAEMON_SERVICE_SELF_ROUTE_H_
#define RDMAD_DAEMON_SERVICE_SELF_ROUTE_H_

#include "daemon/core/transfer.h"
#include "daemon/service/daemon_identity.h"

namespace rdmad::service {

// Rewrites `target` in place when it names a descriptor of this daemon's
// current incarnation: it becomes the region id and TCP key the descriptor
// carries (self_region_id, self_key), with no peer, name or descriptor.
// Anything else is left for the peer layer.
void RouteToSelf(const DaemonIdentity& identity, core::TransferTarget* target);

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_SELF_ROUTE_H_
