// TickClock: a monotonic clock for timing spans of nanoseconds on the data
// path, read for a fraction of what absl::Now() costs.
//
// A ring operation to a region of the same daemon takes the engine a few
// hundred nanoseconds, and its completion says how long (the daemon time).
// Measured on the 2-vCPU test host (a loop of 2M readings): absl::Now()
// 65-70 ns, clock_gettime(CLOCK_MONOTONIC) 30 ns, the TSC 12 ns; two
// absl::Now() readings were a third of the engine's work per operation.
//
// Where the kernel itself keeps time with the TSC (its clocksource is
// "tsc": invariant, and checked to be synchronized across CPUs), a tick is
// one TSC cycle, converted with a rate measured against CLOCK_MONOTONIC
// once per process (Calibrate: two readings 5 ms apart, so the rate is
// off by well under 0.01%). Anywhere else a tick is a nanosecond of
// CLOCK_MONOTONIC.
//
// Ticks are for spans within one process (and its threads); they are not
// a time of day and mean nothing to another process.
//
// Example:
//   const TickClock::Ticks start = TickClock::Now();
//   ...
//   absl::Duration took = TickClock::Since(start);
#ifndef RDMAD_COMMON_TICK_CLOCK_H_
#define RDMAD_COMMON_TICK_CLOCK_H_

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "absl/time/time.h"

namespace rdmad {

class TickClock {
 public:
  using Ticks = int64_t;

  // The current reading. Calibrates first if nothing did yet.
  static Ticks Now() {
    const Rate& rate = TheRate();
    return rate.tsc ? ReadTsc() : ReadMonotonicNanos();
  }
  // The time from `start` to `end` (zero if `end` is before `start`, which
  // two CPUs' counters can be by a few cycles).
  static absl::Duration Between(Ticks start, Ticks end) {
    if (end <= start) return absl::ZeroDuration();
    return absl::Nanoseconds(
        static_cast<int64_t>(static_cast<double>(end - start) *
                             TheRate().nanos_per_tick));
  }
  static absl::Duration Since(Ticks start) { return Between(start, Now()); }

  // Measures the rate now (once per process; it sleeps 5 ms when the TSC is
  // used), so that the first reading on the data path does not. The daemon
  // calls it at startup.
  static void Calibrate() { (void)TheRate(); }
  // Whether ticks are TSC cycles (else CLOCK_MONOTONIC nanoseconds).
  static bool UsesTsc() { return TheRate().tsc; }

 private:
  struct Rate {
    bool tsc = false;
    double nanos_per_tick = 1.0;
  };
  static const Rate& TheRate() {
    static const Rate rate = Measure();
    return rate;
  }
  static Rate Measure();
  static Ticks ReadTsc() {
#if defined(__x86_64__)
    return static_cast<Ticks>(__rdtsc());
#else
    return ReadMonotonicNanos();
#endif
  }
  static Ticks ReadMonotonicNanos();
};

}  // namespace rdmad

#endif  // RDMAD_COMMON_TICK_CLOCK_H_
