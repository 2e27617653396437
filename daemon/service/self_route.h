// Transfers whose target is this daemon itself, named the way a remote
// region would be (a descriptor this daemon issued, or this daemon's own
// Peer address), are served by the local copy path instead of a loopback
// through the peer layer: there the caller is known as the local user it is
// (uid, gid, groups), and the target's own permissions apply on top of its
// export (core::TransferEngine), as on the empty-peer route. Other aliases
// of this daemon's address reach it through Peer.Resolve, which narrows
// what it hands back to the same permissions (PeerService::Resolve).
#ifndef RDMAD_DAEMON_SERVICE_SELF_ROUTE_H_
#define RDMAD_DAEMON_SERVICE_SELF_ROUTE_H_

#include "daemon/core/transfer_engine.h"
#include "daemon/service/daemon_state.h"

namespace rdmad::service {

// Rewrites `request` in place when its target is this daemon:
//   - a descriptor of this daemon's current incarnation becomes the region
//     id and TCP key it carries, with no peer;
//   - a peer equal to this daemon's advertised Peer address, with a name,
//     becomes that name with no peer.
// Anything else is left for the peer layer (including descriptors that do
// not decode: it reports them). Never fails.
void RouteToSelf(const DaemonIdentity& identity,
                 core::TransferRequest* request);

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_SELF_ROUTE_H_
