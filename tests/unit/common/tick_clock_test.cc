// TickClock (common/tick_clock.h): spans it measures agree with
// CLOCK_MONOTONIC's, whichever counter it reads; it never runs backwards
// on one thread; and a span that ends before it starts is zero, not
// negative.
#include "common/tick_clock.h"

#include <chrono>
#include <cstdint>
#include <thread>

#include "gtest/gtest.h"

namespace rdmad {
namespace {

TEST(TickClockTest, ASpanAgreesWithTheMonotonicClock) {
  // A long span, so that the scheduler's delays between the two clocks'
  // readings stay a small part of it.
  using Steady = std::chrono::steady_clock;
  TickClock::Calibrate();  // its 5 ms sleep is not part of the span
  const Steady::time_point steady_start = Steady::now();
  const TickClock::Ticks start = TickClock::Now();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const TickClock::Ticks end = TickClock::Now();
  const Steady::time_point steady_end = Steady::now();
  const absl::Duration ticked = TickClock::Between(start, end);
  const absl::Duration steady = absl::FromChrono(steady_end - steady_start);
  EXPECT_GE(ticked, absl::Milliseconds(199)) << "uses TSC: "
                                              << TickClock::UsesTsc();
  // Within the span measured around it, and within 1% of it (a rate
  // measured wrong by more than that would show here).
  EXPECT_LE(ticked, steady + absl::Microseconds(50));
  EXPECT_GE(ticked, steady * 0.99 - absl::Milliseconds(1));
}

TEST(TickClockTest, NeverRunsBackwardsOnOneThread) {
  TickClock::Ticks last = TickClock::Now();
  for (int i = 0; i < 100000; ++i) {
    const TickClock::Ticks now = TickClock::Now();
    ASSERT_GE(now, last) << "reading " << i;
    last = now;
  }
}

TEST(TickClockTest, ASpanEndingBeforeItStartsIsZero) {
  const TickClock::Ticks now = TickClock::Now();
  EXPECT_EQ(TickClock::Between(now, now), absl::ZeroDuration());
  EXPECT_EQ(TickClock::Between(now, now - 1000), absl::ZeroDuration());
  EXPECT_GE(TickClock::Since(now), absl::ZeroDuration());
}

TEST(TickClockTest, ReadsTheTscWhereTheKernelKeepsTimeWithIt) {
  // What the kernel trusts, the clock uses; elsewhere it reads
  // CLOCK_MONOTONIC, whose ticks are nanoseconds.
  const TickClock::Ticks a = TickClock::Now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const TickClock::Ticks b = TickClock::Now();
  const double ticks_per_ns =
      static_cast<double>(b - a) /
      static_cast<double>(absl::ToInt64Nanoseconds(TickClock::Between(a, b)));
  if (TickClock::UsesTsc()) {
    // Any TSC of this century ticks at more than 0.5 GHz.
    EXPECT_GT(ticks_per_ns, 0.5);
  } else {
    EXPECT_NEAR(ticks_per_ns, 1.0, 1e-6);
  }
}

}  // namespace
}  // namespace rdmad
