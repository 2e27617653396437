#include "common/tick_clock.h"

#include <time.h>

#include <cerrno>
#include <fstream>
#include <limits>
#include <string>

namespace rdmad {
namespace {

constexpr char kClocksource[] =
    "/sys/devices/system/clocksource/clocksource0/current_clocksource";

// The kernel keeps time with the TSC only once it found it invariant and
// synchronized across CPUs; what it trusts, this clock trusts.
bool KernelKeepsTimeWithTsc() {
  std::ifstream in(kClocksource);
  std::string source;
  return static_cast<bool>(in >> source) && source == "tsc";
}

}  // namespace

TickClock::Ticks TickClock::ReadMonotonicNanos() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

#if defined(__x86_64__)

TickClock::Rate TickClock::Measure() {
  Rate rate;
  if (!KernelKeepsTimeWithTsc()) return rate;
  // A pair of readings: CLOCK_MONOTONIC between two TSC readings, the one
  // of three whose TSC readings are closest (the least disturbed).
  struct Pair {
    int64_t tsc;
    int64_t nanos;
  };
  auto pair = [] {
    Pair best{0, 0};
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    for (int i = 0; i < 3; ++i) {
      const int64_t before = static_cast<int64_t>(__rdtsc());
      const int64_t nanos = ReadMonotonicNanos();
      const int64_t after = static_cast<int64_t>(__rdtsc());
      if (after - before < best_gap) {
        best_gap = after - before;
        best = {before + (after - before) / 2, nanos};
      }
    }
    return best;
  };
  const Pair first = pair();
  timespec wait{0, 5'000'000};
  while (::nanosleep(&wait, &wait) != 0 && errno == EINTR) {
  }
  const Pair second = pair();
  if (second.tsc <= first.tsc || second.nanos <= first.nanos) return rate;
  rate.tsc = true;
  rate.nanos_per_tick = static_cast<double>(second.nanos - first.nanos) /
                        static_cast<double>(second.tsc - first.tsc);
  return rate;
}

#else  // no TSC: CLOCK_MONOTONIC nanoseconds

TickClock::Rate TickClock::Measure() { return Rate(); }

#endif

}  // namespace rdmad
