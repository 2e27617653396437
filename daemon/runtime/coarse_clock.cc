#include "daemon/runtime/coarse_clock.h"

#include <time.h>

#include "absl/time/clock.h"

namespace rdmad::runtime {

absl::Time CoarseNow() {
  timespec ts;
  // Cannot fail for a clock id the kernel has had since 2.6.32.
  if (::clock_gettime(CLOCK_REALTIME_COARSE, &ts) != 0) return absl::Now();
  return absl::TimeFromTimespec(ts);
}

bool DeadlinePassed(absl::Time deadline) {
  return DeadlinePassedBy(deadline, CoarseNow(), [] { return absl::Now(); });
}

}  // namespace rdmad::runtime
