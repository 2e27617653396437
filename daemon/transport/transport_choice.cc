#include "daemon/transport/transport_choice.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rdmad::transport {
namespace {

using core::TransportKind;
using core::TransportMode;

bool HasActivePort(const std::vector<core::DeviceInfo>& devices) {
  for (const auto& device : devices) {
    for (const auto& port : device.ports) {
      if (port.state == core::PortState::kActive) return true;
    }
  }
  return false;
}

bool Offers(absl::Span<const TransportKind> offers, TransportKind kind) {
  return std::find(offers.begin(), offers.end(), kind) != offers.end();
}

}  // namespace

absl::StatusOr<TransportChoice> ChooseLocalTransport(
    TransportMode mode, const std::vector<core::DeviceInfo>& devices) {
  const bool usable = mode != TransportMode::kTcp && HasActivePort(devices);
  if (mode == TransportMode::kVerbs && !usable) {
    return absl::FailedPreconditionError(
        devices.empty()
            ? "transport is set to verbs, but libibverbs found no RDMA "
              "device: load the driver (or rdma_rxe for soft-RoCE) or set "
              "transport to tcp (--transport or the config file)"
            : "transport is set to verbs, but no RDMA port is ACTIVE: check "
              "the link (ibv_devinfo) or set transport to tcp (--transport "
              "or the config file)");
  }
  if (usable) {
    return TransportChoice{
        TransportKind::kVerbs,
        mode == TransportMode::kVerbs
            ? "set to verbs by the transport setting"
            : "an RDMA device with an active port was found"};
  }
  return TransportChoice{
      TransportKind::kTcp,
      mode == TransportMode::kTcp ? "set to tcp by the transport setting"
      : devices.empty()           ? "no RDMA devices found by libibverbs"
                                  : "no RDMA port is ACTIVE"};
}

std::vector<TransportKind> OfferedTransports(TransportKind local) {
  std::vector<TransportKind> offered;
  if (local == TransportKind::kVerbs) offered.push_back(TransportKind::kVerbs);
  offered.push_back(TransportKind::kTcp);
  return offered;
}

absl::StatusOr<TransportChoice> ChoosePeerTransport(
    TransportMode mode, bool verbs_usable, const std::string& why_not,
    absl::Span<const TransportKind> peer_offers, const std::string& peer) {
  const bool peer_verbs = Offers(peer_offers, TransportKind::kVerbs);
  const bool peer_tcp = Offers(peer_offers, TransportKind::kTcp);
  if (mode == TransportMode::kVerbs) {
    if (!verbs_usable || !peer_verbs) {
      return absl::FailedPreconditionError(absl::StrCat(
          "transport is set to verbs, but ",
          !verbs_usable ? why_not
                        : absl::StrCat("peer ", peer,
                                       " offers no verbs transport"),
          ": set transport to auto or tcp (--transport or the config "
          "file)"));
    }
    return TransportChoice{TransportKind::kVerbs,
                           "set to verbs by the transport setting"};
  }
  if (mode == TransportMode::kAuto && verbs_usable && peer_verbs) {
    return TransportChoice{TransportKind::kVerbs, "both daemons offer verbs"};
  }
  if (!peer_tcp) {
    return absl::FailedPreconditionError(absl::StrCat(
        "peer ", peer, " offers no transport this daemon can use"));
  }
  std::string reason = mode == TransportMode::kTcp
                           ? "set to tcp by the transport setting"
                       : !peer_verbs ? "the peer offers no verbs transport"
                                     : why_not;
  return TransportChoice{TransportKind::kTcp, std::move(reason)};
}

}  // namespace rdmad::transport
