// VerbsFabric: the rails this daemon's verbs transport runs on, picked
// from the discovered devices by the options, each with its port, GID
// index and NUMA node; the rail pins; the port monitor; and the QPs and
// CQs of a connection on one rail. The connector and acceptor that use it
// are in verbs_transport.cc.
#include <algorithm>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/transport/verbs/gid_selection.h"
#include "daemon/transport/verbs/verbs_transport.h"
#include "spdlog/spdlog.h"

namespace rdmad::verbs {

namespace {

// The NUMA node sysfs gives the device (its PCI function's); -1 when it
// says none (a single-node machine, a virtual device such as rxe).
int DeviceNumaNode(const std::string& name) {
  std::ifstream in(absl::StrCat("/sys/class/infiniband/", name,
                                "/device/numa_node"));
  int node = -1;
  if (!(in >> node)) return -1;
  return node;
}

// The devices to make rails of, by the options (see
// VerbsTransportOptions::rails); each with an ACTIVE port.
absl::StatusOr<std::vector<const core::DeviceInfo*>> PickRailDevices(
    const std::vector<core::DeviceInfo>& devices,
    const VerbsTransportOptions& options) {
  std::vector<const core::DeviceInfo*> picked;
  std::string states;
  const auto find = [&](const std::string& name) -> const core::DeviceInfo* {
    for (const auto& d : devices) {
      if (d.name == name) return &d;
    }
    return nullptr;
  };
  if (!options.rails.empty()) {
    for (const std::string& name : options.rails) {
      const core::DeviceInfo* d = find(name);
      if (d == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            "rails: RDMA device '", name,
            "' is not present: check ibv_devinfo, or leave rails unset "
            "(every device with an ACTIVE port)"));
      }
      if (!ChooseActivePort(*d).ok()) {
        spdlog::warn("rails: RDMA device {} has no ACTIVE port: left out; "
                     "check its link (ibv_devinfo) and restart rdmad",
                     name);
        absl::StrAppend(&states, states.empty() ? "" : ", ", name);
        continue;
      }
      picked.push_back(d);
    }
    if (picked.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rails: none of the listed RDMA devices has an ACTIVE port (",
          states, "): check the links with ibv_devinfo"));
    }
    return picked;
  }
  for (const auto& d : devices) {
    if (!options.device.empty() && d.name != options.device) continue;
    if (ChooseActivePort(d).ok()) {
      picked.push_back(&d);
    } else {
      absl::StrAppend(&states, states.empty() ? "" : ", ", d.name);
    }
  }
  if (picked.empty()) {
    return absl::FailedPreconditionError(
        options.device.empty()
            ? absl::StrCat("no RDMA device has an ACTIVE port (devices: ",
                           states.empty() ? "none" : states,
                           "): check the link with ibv_devinfo")
            : absl::StrCat("RDMA device '", options.device,
                           "' is not present or has no ACTIVE port: check "
                           "ibv_devinfo, or leave the device unset"));
  }
  std::sort(picked.begin(), picked.end(),
            [](const core::DeviceInfo* a, const core::DeviceInfo* b) {
              return a->name < b->name;
            });
  return picked;
}

}  // namespace

VerbsFabric::VerbsFabric(std::vector<LocalRail> rails,
                         VerbsTransportOptions options,
                         std::vector<RailPinSet> pins,
                         std::unique_ptr<PortMonitor> monitor)
    : rails_(std::move(rails)),
      options_(std::move(options)),
      pins_(std::move(pins)),
      monitor_(std::move(monitor)),
      peer_rails_(std::make_unique<PeerRailsRegistry>(
          options_.rail, options_.max_rail_peers)) {}

absl::StatusOr<std::shared_ptr<VerbsFabric>> VerbsFabric::Open(
    const std::vector<core::DeviceInfo>& devices,
    const std::vector<std::shared_ptr<Device>>& opened,
    VerbsTransportOptions options) {
  RDMAD_ASSIGN_OR_RETURN(std::vector<const core::DeviceInfo*> picked,
                         PickRailDevices(devices, options));
  if (picked.size() > kMaxRails) picked.resize(kMaxRails);
  if (options.qps_per_peer == 0) options.qps_per_peer = 4;
  std::vector<LocalRail> rails;
  std::vector<std::shared_ptr<Device>> rail_devices;
  for (const core::DeviceInfo* info : picked) {
    RDMAD_ASSIGN_OR_RETURN(const uint32_t port, ChooseActivePort(*info));
    RDMAD_ASSIGN_OR_RETURN(
        const uint32_t gid_index,
        ChooseGidIndex(info->ports[port - 1], options.gid_index));
    LocalRail rail;
    for (const auto& d : opened) {
      if (d->name() == info->name) rail.device = d;
    }
    if (rail.device == nullptr) {
      return absl::InternalError(
          absl::StrCat("RDMA device ", info->name, " was not opened"));
    }
    rail.qp = options.qp;
    rail.qp.port = port;
    rail.qp.gid_index = gid_index;
    rail.numa_node = DeviceNumaNode(info->name);
    std::string gid_type = "default";
    for (const auto& g : info->ports[port - 1].gids) {
      if (g.index == gid_index) gid_type = g.type;
    }
    spdlog::info("verbs transport: rail {} on device {} port {} GID index {} "
                 "({}), NUMA node {}, {} QPs per peer",
                 rails.size(), info->name, port, gid_index, gid_type,
                 rail.numa_node, options.qps_per_peer);
    rail_devices.push_back(rail.device);
    rails.push_back(std::move(rail));
  }
  std::vector<RailPinSet> pins;
  for (const RailPinConfig& pin : options.pins) {
    RailPinSet set{pin.region_prefix, 0};
    for (const std::string& name : pin.devices) {
      size_t r = 0;
      while (r < rails.size() && rails[r].device->name() != name) ++r;
      if (r == rails.size()) {
        std::vector<std::string> names;
        for (const LocalRail& rail : rails) names.push_back(rail.device->name());
        return absl::FailedPreconditionError(absl::StrCat(
            "rail_pins: device '", name, "' of the pin for '",
            pin.region_prefix, "' is not one of the rails (",
            absl::StrJoin(names, ", "), ")"));
      }
      set.rails |= RailBit(r);
    }
    pins.push_back(std::move(set));
  }
  std::unique_ptr<PortMonitor> monitor;
  if (auto started = PortMonitor::Start(rail_devices); started.ok()) {
    monitor = *std::move(started);
  } else {
    spdlog::warn("verbs transport: port events are not followed ({}): a "
                 "port that goes down is noticed only when its QPs fail",
                 std::string(started.status().message()));
  }
  return std::shared_ptr<VerbsFabric>(new VerbsFabric(
      std::move(rails), std::move(options), std::move(pins),
      std::move(monitor)));
}

absl::StatusOr<std::vector<std::unique_ptr<QueuePair>>> VerbsFabric::CreateQps(
    size_t rail, uint32_t count, std::shared_ptr<CompletionQueue>* cq,
    ibv_srq* srq) const {
  RDMAD_ASSIGN_OR_RETURN(
      *cq, CompletionQueue::Create(rails_[rail].device,
                                   CqEntriesFor(rail, count)));
  return CreateQpsOn(rail, count, *cq, srq);
}

int VerbsFabric::CqEntriesFor(size_t rail, uint32_t count) const {
  const LocalRail& on = rails_[rail];
  // Every WR completes at most once, so a CQ as deep as all send queues
  // together can never overrun.
  return static_cast<int>(std::min<uint64_t>(
      uint64_t{count} * (on.qp.max_send_wr + on.qp.max_recv_wr) + 1,
      static_cast<uint64_t>(on.device->attributes().max_cqe)));
}

absl::StatusOr<std::vector<std::unique_ptr<QueuePair>>>
VerbsFabric::CreateQpsOn(size_t rail, uint32_t count,
                         const std::shared_ptr<CompletionQueue>& cq,
                         ibv_srq* srq) const {
  QpConfig config = rails_[rail].qp;
  config.srq = srq;
  std::vector<std::unique_ptr<QueuePair>> qps;
  for (uint32_t i = 0; i < count; ++i) {
    RDMAD_ASSIGN_OR_RETURN(auto qp, QueuePair::Create(cq, config));
    RDMAD_RETURN_IF_ERROR(qp->ModifyToInit());
    qps.push_back(std::move(qp));
  }
  return qps;
}

}  // namespace rdmad::verbs
