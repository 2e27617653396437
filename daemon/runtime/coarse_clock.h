// The wall clock, read cheaply where a few milliseconds do not matter.
//
// absl::Now() reads the precise clock: a vDSO call of ~20 ns on a host
// with a usable TSC, but a system call and an emulated device read (~3 us)
// in a VM without one, such as the lab's TCG guests (docs/PERFORMANCE.md),
// where the data path read it several times per operation. The coarse
// clock is the time of the kernel's last tick, read from the vDSO page
// without a system call on any machine.
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

}  // namespace rdmad::runtime

#endif  // RDMAD_DAEMON_RUNTIME_COARSE_CLOCK_H_
