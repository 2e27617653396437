#include "daemon/service/accept_backoff.h"

#include <algorithm>

namespace rdmad::service {

void AcceptBackoff::Failed(absl::Time now) {
  pause_ = pause_ == absl::ZeroDuration()
               ? kFirstPause
               : std::min(pause_ * 2, kLongestPause);
  resume_at_ = now + pause_;
  ++unlogged_;
}

void AcceptBackoff::Succeeded() {
  pause_ = absl::ZeroDuration();
  resume_at_ = absl::InfinitePast();
}

std::optional<uint64_t> AcceptBackoff::TakeLogTurn(absl::Time now) {
  if (now - last_log_ < kLogInterval) return std::nullopt;
  last_log_ = now;
  // This failure is logged; the ones before it since the last line were
  // not.
  const uint64_t skipped = unlogged_ > 0 ? unlogged_ - 1 : 0;
  unlogged_ = 0;
  return skipped;
}

}  // namespace rdmad::service
