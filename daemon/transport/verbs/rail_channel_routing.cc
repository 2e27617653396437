// RailChannel's choice of rails: which rails hold a key for an operation
// and registered its local memory, which are healthy, which the pins or
// the memory's NUMA node prefer, bringing paused rails back when due, and
// the plan that splits an operation across them (or says why no rail can
// carry it). Posting and completions are in rail_channel.cc.
#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/core/region.h"
#include "daemon/transport/verbs/rail_channel.h"
#include "spdlog/spdlog.h"

namespace rdmad::verbs {
namespace {

// The NUMA node of the page at `addr`, -1 when the kernel cannot say.
int MemoryNodeOf(const void* addr) {
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, nullptr, 0, const_cast<void*>(addr),
              MPOL_F_NODE | MPOL_F_ADDR) != 0) {
    return -1;
  }
  return node;
}

// Whether `region` has a local registration on `device`.
bool HasLocalKey(const core::Region& region, const std::string& device) {
  for (const auto& k : region.local_keys()) {
    if (k.device == device && k.lkey != 0) return true;
  }
  return false;
}

}  // namespace

std::optional<transport::RemoteKey> RailChannel::KeyOn(
    size_t rail, const core::RemoteRegionInfo* region,
    const transport::RemoteKey& fallback) const {
  const RailLink& link = links_[rail];
  if (link.channel == nullptr) return std::nullopt;
  // Without the region's description only the key the caller took for the
  // first rail is known.
  if (region == nullptr) {
    return rail == 0 ? std::optional<transport::RemoteKey>(fallback)
                     : std::nullopt;
  }
  for (const auto& k : region->rkeys) {
    if (k.device == link.remote_device && k.rkey != 0) {
      return transport::RemoteKey{region->addr, k.rkey};
    }
  }
  return std::nullopt;
}

RailSet RailChannel::Keyed(const transport::RemoteOp& op) const {
  RailSet keyed = 0;
  RailSet registered = 0;
  for (size_t r = 0; r < links_.size(); ++r) {
    if (KeyOn(r, op.remote.get(), op.key).has_value()) keyed |= RailBit(r);
    if (op.local != nullptr && HasLocalKey(*op.local, links_[r].device)) {
      registered |= RailBit(r);
    }
  }
  // A device that did not register the local memory (a dma-buf on a
  // device without dma-buf support) is left out while another rail can
  // carry the operation; with none, the rail's own channel says why.
  return (keyed & registered) != 0 ? keyed & registered : keyed;
}

RailSet RailChannel::Preferred(const transport::RemoteOp& op) const {
  if (op.local != nullptr && !op.local->name().empty()) {
    for (const RailPinSet& pin : options_.pins) {
      if (absl::StartsWith(op.local->name(), pin.region_prefix)) {
        return pin.rails;
      }
    }
  }
  if (numa_matters_) {
    const int node = options_.memory_node ? options_.memory_node(op.local_addr)
                                          : MemoryNodeOf(op.local_addr);
    RailSet near = 0;
    for (size_t r = 0; r < links_.size() && node >= 0; ++r) {
      if (links_[r].numa_node == node) near |= RailBit(r);
    }
    if (near != 0) return near;
  }
  return kAllRails;
}

RailSet RailChannel::Healthy() const {
  RailSet healthy = 0;
  for (size_t r = 0; r < links_.size(); ++r) {
    const RailLink& link = links_[r];
    if (link.channel == nullptr || (shut_ & RailBit(r)) != 0 ||
        link.channel->NeedsReconnect() ||
        !rails_->scheduler.port_active(r)) {
      continue;
    }
    healthy |= RailBit(r);
  }
  return healthy;
}

void RailChannel::ResumeDue(RailSet usable, absl::Time now) {
  RailScheduler& s = rails_->scheduler;
  for (size_t r = 0; r < links_.size(); ++r) {
    if ((usable & RailBit(r)) != 0 && s.PauseOver(r, now) &&
        s.Resume(r, now)) {
      spdlog::info("peer {}: rail {} ({}) is back from its pause: its next "
                   "piece of work is a probe",
                   options_.peer, r, RailLabel(links_[r]));
    }
  }
  if (usable == 0 || s.Eligible(usable) != 0) return;
  // Every rail that could carry anything is paused: a pause only makes
  // sense while another rail works.
  for (size_t r = 0; r < links_.size(); ++r) {
    if ((usable & RailBit(r)) != 0 && s.Resume(r, now, /*early=*/true)) {
      spdlog::info("peer {}: rail {} ({}) is tried before its pause is over: "
                   "no other rail is left",
                   options_.peer, r, RailLabel(links_[r]));
    }
  }
}

bool RailChannel::Plan(Op& op, absl::Time now, std::vector<RailSlice>* slices,
                       absl::Status* why) {
  RailScheduler& s = rails_->scheduler;
  const RailSet usable = op.keyed & Healthy();
  ResumeDue(usable, now);
  const RailSet preferred = usable & Preferred(op.op);
  const RailSet from = s.Eligible(preferred) != 0 ? preferred : usable;
  if (op.op.length <= s.options().stripe_threshold) {
    if (auto rail = s.PickWhole(from)) {
      slices->push_back(RailSlice{*rail, 0, op.op.length});
    }
  } else {
    *slices = s.Split(op.op.length, from, now);
  }
  if (slices->empty()) {
    *why = NoRailError(op.keyed);
    return false;
  }
  if (op.op.immediate.has_value() && slices->size() > 1) {
    op.held = slices->back();
    slices->pop_back();
  }
  for (const RailSlice& slice : *slices) {
    s.Posted(slice.rail, slice.length, now);
  }
  op.pieces_left = slices->size();
  ++ops_in_flight_;
  return true;
}

absl::Status RailChannel::NoRailError(RailSet keyed) const {
  std::vector<std::string> devices;
  for (const RailLink& link : links_) {
    if (link.channel != nullptr) devices.push_back(link.remote_device);
  }
  if (keyed == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the region on peer ", options_.peer,
        " has no rkey for the devices this daemon's rails reach there (",
        absl::StrJoin(devices, ", "),
        "): it is not exported over verbs; export it again on that node"));
  }
  std::vector<std::string> why;
  const absl::Time now = options_.now();
  for (size_t r = 0; r < links_.size(); ++r) {
    if ((keyed & RailBit(r)) == 0) continue;
    const RailStats st = rails_->scheduler.Stats(r, now);
    why.push_back(absl::StrCat(
        "rail ", r, " (", RailLabel(links_[r]), ") ",
        !st.port_active ? "port down"
        : st.state == RailState::kPaused
            ? absl::StrCat("paused for ", absl::FormatDuration(st.paused_left),
                           ": ", st.last_error)
            : "QPs failed, being rebuilt"));
  }
  return absl::UnavailableError(absl::StrCat(
      "no rail to peer ", options_.peer, " can carry the operation: ",
      absl::StrJoin(why, "; "), "; retry"));
}

absl::StatusOr<transport::RemoteKey> RailChannel::KeyFor(
    const core::RemoteRegionInfo& region) const {
  std::vector<std::string> devices;
  for (size_t r = 0; r < links_.size(); ++r) {
    if (auto key = KeyOn(r, &region, {})) return *key;
    if (links_[r].channel != nullptr) {
      devices.push_back(links_[r].remote_device);
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      core::RemoteRegionLabel(region), " on peer ", region.peer,
      " has no rkey for its device", devices.size() == 1 ? " " : "s ",
      absl::StrJoin(devices, ", "),
      ": it is not exported over verbs; export it again on that node"));
}

}  // namespace rdmad::verbs
