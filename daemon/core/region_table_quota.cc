// RegionTable's per-uid quotas: what each uid holds (regions and pinned
// bytes), the checks against quota_regions_per_uid and
// quota_pinned_bytes_per_uid with messages that name the setting to raise,
// and the charges for memory that is not a region (queue rings).
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/size.h"
#include "common/status_macros.h"
#include "daemon/core/region_table.h"

namespace rdmad::core {

absl::Status RegionTable::CheckQuota(const Caller& caller,
                                     uint64_t size) const {
  UidUsage used;
  if (auto it = usage_.find(caller.uid); it != usage_.end()) used = it->second;
  if (limits_.max_regions_per_uid != 0 &&
      used.regions >= limits_.max_regions_per_uid) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", caller.uid, " already holds ", used.regions,
        " regions, its quota (quota_regions_per_uid) is ",
        limits_.max_regions_per_uid, ": free regions it no longer needs, or "
        "raise quota_regions_per_uid in the rdmad config and restart rdmad"));
  }
  return CheckBytesQuota(caller.uid, used, size,
                         absl::StrCat("allocating ", HumanSize(size)),
                         "free regions");
}

absl::Status RegionTable::CheckBytesQuota(uint32_t uid, const UidUsage& used,
                                          uint64_t size, absl::string_view what,
                                          absl::string_view remedy) const {
  if (limits_.max_pinned_bytes_per_uid != 0 &&
      (size > limits_.max_pinned_bytes_per_uid ||
       used.pinned_bytes > limits_.max_pinned_bytes_per_uid - size)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, " would make uid ", uid, " hold ",
        HumanSize(used.pinned_bytes + size), ", over its quota "
        "(quota_pinned_bytes_per_uid) of ",
        HumanSize(limits_.max_pinned_bytes_per_uid), ": ", remedy,
        ", or raise quota_pinned_bytes_per_uid in the rdmad config and "
        "restart rdmad"));
  }
  return absl::OkStatus();
}

void RegionTable::Uncharge(uint32_t uid, uint64_t regions, uint64_t bytes) {
  auto it = usage_.find(uid);
  if (it == usage_.end()) return;
  it->second.regions -= std::min(it->second.regions, regions);
  it->second.pinned_bytes -= std::min(it->second.pinned_bytes, bytes);
  if (it->second.regions == 0 && it->second.pinned_bytes == 0) usage_.erase(it);
}

absl::StatusOr<MemoryCharge> RegionTable::ChargeMemory(const Caller& caller,
                                                      uint64_t bytes,
                                                      absl::string_view what) {
  absl::MutexLock lock(&mu_);
  UidUsage used;
  if (auto it = usage_.find(caller.uid); it != usage_.end()) used = it->second;
  RDMAD_RETURN_IF_ERROR(CheckBytesQuota(caller.uid, used, bytes, what,
                                        "close queues or free regions"));
  usage_[caller.uid].pinned_bytes += bytes;
  return MemoryCharge(this, caller.uid, bytes);
}

void RegionTable::GiveBack(uint32_t uid, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  Uncharge(uid, 0, bytes);
}

MemoryCharge& MemoryCharge::operator=(MemoryCharge&& other) noexcept {
  if (this != &other) {
    Release();
    table_ = std::exchange(other.table_, nullptr);
    uid_ = other.uid_;
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void MemoryCharge::Release() {
  if (table_ != nullptr) table_->GiveBack(uid_, bytes_);
  table_ = nullptr;
  bytes_ = 0;
}

UidUsage RegionTable::UsageOf(uint32_t uid) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = usage_.find(uid);
  return it == usage_.end() ? UidUsage{} : it->second;
}

}  // namespace rdmad::core
