#include "daemon/transport/verbs/gid_selection.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/transport/verbs/conversions.h"

namespace rdmad::verbs {
namespace {

std::string DescribeGids(const core::PortInfo& port) {
  std::vector<std::string> parts;
  parts.reserve(port.gids.size());
  for (const core::GidInfo& gid : port.gids) {
    parts.push_back(
        absl::StrCat(gid.index, "=", gid.text, " (", gid.type, ")"));
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

}  // namespace

absl::StatusOr<uint32_t> ChooseGidIndex(const core::PortInfo& port,
                                        std::optional<uint32_t> configured) {
  if (port.gids.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "port ", port.port,
        " has no valid GID: bring its network device up and give it an IP "
        "address (RoCE), or check the subnet manager (InfiniBand)"));
  }
  if (configured.has_value()) {
    for (const core::GidInfo& gid : port.gids) {
      if (gid.index == *configured) return *configured;
    }
    return absl::NotFoundError(absl::StrCat(
        "configured GID index ", *configured, " is not a valid entry of port ",
        port.port, "; valid entries: ", DescribeGids(port),
        ". Pick one of those or leave the index unset to choose "
        "automatically"));
  }
  // The table from DiscoverDevices is sorted by index, but do not rely on it.
  const core::GidInfo* best_v4 = nullptr;
  const core::GidInfo* best_v2 = nullptr;
  for (const core::GidInfo& gid : port.gids) {
    if (gid.type != kGidTypeRoceV2) continue;
    if (best_v2 == nullptr || gid.index < best_v2->index) best_v2 = &gid;
    if (IsIpv4MappedGid(gid.raw) &&
        (best_v4 == nullptr || gid.index < best_v4->index)) {
      best_v4 = &gid;
    }
  }
  if (best_v4 != nullptr) return best_v4->index;
  if (best_v2 != nullptr) return best_v2->index;
  return 0u;
}

absl::StatusOr<uint32_t> ChooseActivePort(const core::DeviceInfo& device) {
  std::vector<std::string> states;
  for (const core::PortInfo& port : device.ports) {
    if (port.state == core::PortState::kActive) return port.port;
    states.push_back(
        absl::StrCat(port.port, "=", core::PortStateName(port.state)));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "device ", device.name, " has no ACTIVE port (",
      states.empty() ? "no ports" : absl::StrJoin(states, ", "),
      "): check the cable/link, the subnet manager (InfiniBand) or that the "
      "network device is up (RoCE)"));
}

}  // namespace rdmad::verbs
