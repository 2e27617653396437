// The wall clock, read cheaply where a few milliseconds do not matter.
//
// The coarse clock is the time of the kernel's last tick, read from the
// vDSO page without touching a clock device. Measured (a loop of 2M
// readings, docs/PERFORMANCE.md): 8.5-10 ns on the test host against
// 78-91 ns for absl::Now(), and 69 ns against 311 ns in the lab's TCG
// guests. The data path used to read the precise clock several times per
// remote operation where a tick's precision, or none, would do.
#ifndef RDMAD_DAEMON_RUNTIME_COARSE_CLOCK_H_
#define RDMAD_DAEMON_RUNTIME_COARSE_CLOCK_H_

#include "absl/time/time.h"

namespace rdmad::runtime {

// How far the coarse clock may be behind the precise one: a tick (10 ms at
// HZ=100, the coarsest kernel), with room to spare.
inline constexpr absl::Duration kCoarseClockSlack = absl::Milliseconds(50);

// The wall clock as of the kernel's last tick: never ahead of absl::Now(),
// behind it by less than kCoarseClockSlack.
absl::Time CoarseNow();

// Whether `deadline` has passed by absl::Now(), which is read only when the
// coarse clock puts the deadline within kCoarseClockSlack.
bool DeadlinePassed(absl::Time deadline);

// The rule of DeadlinePassed for any pair of clocks (Timers uses its own):
// `coarse` read now, `precise` called only near the deadline.
template <typename PreciseNow>
bool DeadlinePassedBy(absl::Time deadline, absl::Time coarse,
                      PreciseNow precise) {
  if (deadline - coarse > kCoarseClockSlack) return false;
  return precise() >= deadline;
}

}  // namespace rdmad::runtime

#endif  // RDMAD_DAEMON_RUNTIME_COARSE_CLOCK_H_
