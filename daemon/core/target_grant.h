// Which way a transfer target is reached, and what a handle on it may do
// (Local.OpenRemote). The transfer engine takes the same four routes, in
// the same order, for each operation (TransferEngine::SubmitBatch); this
// decides them once for a handle, so that a handle promises no more than
// its operations will be allowed:
//
//   kSelfExport  a descriptor this daemon issued (TransferTarget::
//                self_region_id, service/self_route.h): its export,
//                narrowed to what the caller's own permissions on the
//                region allow (each operation checks both again)
//   kLocalName   a region of this daemon by name: the caller's own
//                permissions, nothing wider
//   kDirectory   a name not held here, when there is a cluster directory:
//                its holder, looked up per operation, decides
//   kPeer        a region on another daemon: that daemon's answer to
//                Peer.Resolve decides
//
// Pure policy over the region table: no locks of its own, no I/O. The two
// routes that ask elsewhere are the caller's to follow.
//
// Example:
//   RDMAD_ASSIGN_OR_RETURN(TargetGrant grant,
//                          GrantTarget(caller, target, regions, reach));
//   if (grant.route == TargetRoute::kPeer) { /* ask the peer layer */ }
#ifndef RDMAD_DAEMON_CORE_TARGET_GRANT_H_
#define RDMAD_DAEMON_CORE_TARGET_GRANT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/region.h"
#include "daemon/core/region_table.h"
#include "daemon/core/transfer.h"
#include "daemon/core/transport_kind.h"

namespace rdmad::core {

enum class TargetRoute : uint8_t { kSelfExport, kLocalName, kDirectory, kPeer };

// "self export", "local name", "directory", "peer": for logs and tests.
absl::string_view TargetRouteName(TargetRoute route);

// What this daemon can reach beyond its own regions.
struct TargetReach {
  bool directory = false;  // a cluster directory finds names not held here
  bool peers = false;      // a data transport to other daemons
};

// A route, and for the two routes served here what a handle may do.
struct TargetGrant {
  TargetRoute route = TargetRoute::kPeer;
  // Known for kSelfExport and kLocalName; the holder says for the others.
  uint64_t size = 0;
  RemoteAccess access = RemoteAccess::kNone;
  // kLocal for the routes served here; kNone until the holder is known.
  TransportKind transport = TransportKind::kNone;
};

// The route to `target` (decoded, and routed to this daemon where it names
// one of its descriptors) and what `caller` may do through it. Refusals:
//   - a descriptor of this daemon: NOT_FOUND when its region is no longer
//     exported, PERMISSION_DENIED for a key of an earlier export (both from
//     Region::BeginExportUse), PERMISSION_DENIED when neither reading nor
//     writing is allowed by both the export and the caller's permissions;
//   - a name here: NOT_FOUND when no region has it and there is no
//     directory, PERMISSION_DENIED when the caller may neither read nor
//     write it;
//   - another daemon: FAILED_PRECONDITION when there is no data transport
//     to peers.
absl::StatusOr<TargetGrant> GrantTarget(const Caller& caller,
                                        const TransferTarget& target,
                                        const RegionTable& regions,
                                        TargetReach reach);

// What a local caller may do to a region of this daemon: its own
// permissions decide (TransferEngine::CopyLocal), nothing wider.
RemoteAccess LocalAccessOf(const Caller& caller, const Region& region);

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_TARGET_GRANT_H_
