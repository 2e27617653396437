#include "daemon/runtime/accept_backoff.h"

#include <cerrno>

#include <algorithm>
#include <cstring>

#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace rdmad::runtime {

bool AcceptBackoff::ShortOfResources(int error) {
  return error == EMFILE || error == ENFILE || error == ENOBUFS ||
         error == ENOMEM;
}

const char* AcceptBackoff::Remedy(int error) {
  if (error == EMFILE || error == ENFILE) {
    return "raise the open-files limit (LimitNOFILE= in the unit, ulimit -n) "
           "or free regions";
  }
  if (error == ENOBUFS || error == ENOMEM) {
    return "the system is short of memory";
  }
  return "see the error above";
}

void AcceptBackoff::FailedAndLog(int error, absl::string_view listener,
                                 absl::string_view who) {
  const absl::Time now = absl::Now();
  Failed(now);
  if (std::optional<uint64_t> skipped = TakeLogTurn(now)) {
    spdlog::error(
        "accept on {} failed: {} ({} more such failures since the last "
        "message); {} wait, retrying every {}: {}",
        std::string(listener), std::strerror(error), *skipped,
        std::string(who), absl::FormatDuration(pause_), Remedy(error));
  }
}

void AcceptBackoff::Failed(absl::Time now) {
  pause_ = pause_ == absl::ZeroDuration()
               ? kFirstPause
               : std::min(pause_ * 2, kLongestPause);
  resume_at_ = now + pause_;
  ++unlogged_;
}

int AcceptBackoff::PollTimeoutMs(absl::Time now) const {
  if (!Paused(now)) return -1;
  return static_cast<int>(absl::ToInt64Milliseconds(
      absl::Ceil(resume_at_ - now, absl::Milliseconds(1))));
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

}  // namespace rdmad::runtime
