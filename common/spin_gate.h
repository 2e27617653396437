// SpinGate: whether a thread should busy-poll before it sleeps, judged by
// whether it has a CPU to itself.
//
// Busy-polling wins while the thread's CPU is otherwise idle: the event it
// waits for is seen a wake-up sooner. On a CPU shared with other runnable
// threads it loses twice over. The spin uses up time the thread it waits
// for could run in; and the scheduler charges the spinner for it, so that
// when the awaited event comes the spinner waits behind the others for
// their time slices (milliseconds), where a thread that slept is run at
// once. Measured on 2 cores with four CPU-burning processes beside two
// daemons: a remote 8-byte WRITE's p99 was 8-12 ms with spinning on,
// against sockperf's 16-45 us.
//
// The sign that the CPU is shared is the thread being preempted: its
// involuntary context switches (getrusage RUSAGE_THREAD) rise. Looked at
// most every kCheckEvery (one system call), after a wait. A rise closes
// the gate for a quiet period: kFirstQuiet, doubling up to kMaxQuiet while
// reopenings see more; halved again each time the gate stayed open that
// long without one.
//
// The kernel counts a switch away from a thread that is still runnable as
// involuntary, sched_yield's included: the yields a thread makes itself
// (YieldCpu) are taken off the count, so that a client and an engine
// handing a CPU back and forth (common/queue_layout.h) keep spinning.
//
// One per thread (thread-compatible): the counts are the calling thread's.
#ifndef RDMAD_COMMON_SPIN_GATE_H_
#define RDMAD_COMMON_SPIN_GATE_H_

#include <cstdint>

#include "absl/time/time.h"

namespace rdmad {

// sched_yield, counted for the calling thread's SpinGate.
void YieldCpu();

class SpinGate {
 public:
  // Reads the calling thread's involuntary context switches: a stand-in
  // in tests.
  using PreemptionsFn = int64_t (*)();

  static constexpr absl::Duration kCheckEvery = absl::Milliseconds(1);
  static constexpr absl::Duration kFirstQuiet = absl::Milliseconds(20);
  static constexpr absl::Duration kMaxQuiet = absl::Seconds(1);

  explicit SpinGate(PreemptionsFn preemptions = &ThreadPreemptions)
      : preemptions_(preemptions) {}

  // Whether to busy-poll now.
  bool open(absl::Time now) const { return now >= closed_until_; }

  // After a wait (spun or slept), at `now`: looks at the preemptions when
  // kCheckEvery has passed since the last look. Cheap otherwise.
  void Check(absl::Time now) {
    if (now < next_check_) return;
    Look(now);
  }

  // The calling thread's involuntary context switches so far (-1 if
  // unknown), and the yields it made through YieldCpu.
  static int64_t ThreadPreemptions();
  static int64_t ThreadYields();

 private:
  void Look(absl::Time now);

  const PreemptionsFn preemptions_;
  absl::Time next_check_ = absl::InfinitePast();
  absl::Time closed_until_ = absl::InfinitePast();
  absl::Duration quiet_ = kFirstQuiet;
  int64_t last_ = -1;
  int64_t last_yields_ = 0;
};

}  // namespace rdmad

#endif  // RDMAD_COMMON_SPIN_GATE_H_
