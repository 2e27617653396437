// Which transport to use: the one place that decides, for this daemon as a
// whole (at start, from its devices and the config's `transport`) and for
// each peer (from what both daemons offer in Peer.Hello).
//
//   mode   this daemon          peer offers      chosen
//   auto   verbs usable         verbs            verbs
//   auto   anything else        tcp              tcp
//   tcp    -                    tcp              tcp
//   verbs  verbs usable         verbs            verbs
//   verbs  otherwise            -                FAILED_PRECONDITION
// A peer that offers nothing this daemon can use is FAILED_PRECONDITION.
#ifndef RDMAD_DAEMON_TRANSPORT_TRANSPORT_CHOICE_H_
#define RDMAD_DAEMON_TRANSPORT_TRANSPORT_CHOICE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "daemon/core/device_info.h"
#include "daemon/core/transport_kind.h"

namespace rdmad::transport {

struct TransportChoice {
  core::TransportKind kind = core::TransportKind::kNone;
  std::string reason;  // for status, ListPeers and logs
};

// This daemon's own transport at start: verbs when a device has an ACTIVE
// port (and the mode allows it), else TCP. FAILED_PRECONDITION, saying what
// to fix, when the mode is verbs and no port is active.
absl::StatusOr<TransportChoice> ChooseLocalTransport(
    core::TransportMode mode, const std::vector<core::DeviceInfo>& devices);

// What this daemon offers peers in Hello, best first: verbs (when it is the
// local transport) and always TCP (every daemon serves TCP, so that a peer
// without RDMA can still reach it).
std::vector<core::TransportKind> OfferedTransports(core::TransportKind local);

// The transport to use with one peer. `verbs_usable` and `why_not` say
// whether this daemon can open verbs channels now (Connector::Usable).
absl::StatusOr<TransportChoice> ChoosePeerTransport(
    core::TransportMode mode, bool verbs_usable, const std::string& why_not,
    absl::Span<const core::TransportKind> peer_offers,
    const std::string& peer);

}  // namespace rdmad::transport

#endif  // RDMAD_DAEMON_TRANSPORT_TRANSPORT_CHOICE_H_
