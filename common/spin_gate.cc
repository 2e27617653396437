#include "common/spin_gate.h"

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>

namespace rdmad {

namespace {

thread_local int64_t t_yields = 0;

}  // namespace

void YieldCpu() {
  ++t_yields;
  ::sched_yield();
}

int64_t SpinGate::ThreadPreemptions() {
  rusage usage{};
  if (::getrusage(RUSAGE_THREAD, &usage) != 0) return -1;
  return usage.ru_nivcsw;
}

int64_t SpinGate::ThreadYields() { return t_yields; }

void SpinGate::Look(absl::Time now) {
  next_check_ = now + kCheckEvery;
  const int64_t count = preemptions_();
  const int64_t yields = ThreadYields();
  const bool was_open = open(now);
  // A yield switches away at most once (not at all when nothing else was
  // runnable): more switches than yields means another thread took the CPU.
  if (count >= 0 && last_ >= 0 && count - last_ > yields - last_yields_) {
    // Preempted since the last look: another thread wanted this CPU.
    closed_until_ = now + quiet_;
    quiet_ = std::min(2 * quiet_, kMaxQuiet);
  } else if (was_open && last_ >= 0 && now - closed_until_ >= quiet_) {
    // Open for as long as it was last closed without being preempted: the
    // CPU is more ours again.
    quiet_ = std::max(quiet_ / 2, kFirstQuiet);
  }
  last_ = count;
  last_yields_ = yields;
}

}  // namespace rdmad
