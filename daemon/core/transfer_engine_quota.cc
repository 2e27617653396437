// TransferEngine's per-uid quota of transfers in flight
// (quota_transfers_per_uid): slots taken as transfers start and given back
// as they finish. Without a quota nothing is counted.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/core/transfer_engine.h"

namespace rdmad::core {

uint64_t TransferEngine::AcquireUpTo(uint32_t uid, uint64_t n) {
  // Without a quota nothing needs counting: no lock on the data path.
  if (n == 0 || limits_.max_in_flight_per_uid == 0) return n;
  absl::MutexLock lock(&mu_);
  uint64_t& held = in_flight_[uid];
  const uint64_t room = held < limits_.max_in_flight_per_uid
                            ? limits_.max_in_flight_per_uid - held
                            : 0;
  const uint64_t taken = std::min(n, room);
  held += taken;
  if (held == 0) in_flight_.erase(uid);
  return taken;
}

absl::Status TransferEngine::Acquire(uint32_t uid) {
  if (AcquireUpTo(uid, 1) == 1) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "uid ", uid, " already has ", InFlight(uid),
      " transfers in flight, its quota (quota_transfers_per_uid) is ",
      limits_.max_in_flight_per_uid,
      ": wait for some to complete, or raise quota_transfers_per_uid in "
      "the rdmad config and restart rdmad"));
}

void TransferEngine::Release(uint32_t uid, uint64_t n) {
  if (limits_.max_in_flight_per_uid == 0) return;  // never counted
  absl::MutexLock lock(&mu_);
  auto it = in_flight_.find(uid);
  if (it == in_flight_.end()) return;
  it->second -= std::min(it->second, n);
  if (it->second == 0) in_flight_.erase(it);
}

uint64_t TransferEngine::InFlight(uint32_t uid) const {
  absl::MutexLock lock(&mu_);
  auto it = in_flight_.find(uid);
  return it == in_flight_.end() ? 0 : it->second;
}

}  // namespace rdmad::core
