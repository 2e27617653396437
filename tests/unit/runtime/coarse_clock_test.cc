// runtime::CoarseNow and DeadlinePassed (coarse_clock.h), and
// Timers::DeadlinePassed: the coarse clock is never ahead of the precise
// one and never further behind than kCoarseClockSlack, and a deadline is
// judged by the precise clock wherever the coarse one could be wrong.
#include "daemon/runtime/coarse_clock.h"

#include "absl/time/clock.h"
#include "daemon/runtime/timers.h"
#include "gtest/gtest.h"

namespace rdmad::runtime {
namespace {

TEST(CoarseClockTest, IsBehindThePreciseClockByLessThanTheSlack) {
  for (int i = 0; i < 10000; ++i) {
    const absl::Time before = absl::Now();
    const absl::Time coarse = CoarseNow();
    const absl::Time after = absl::Now();
    ASSERT_LE(coarse, after) << "ahead of the precise clock";
    ASSERT_LT(before - coarse, kCoarseClockSlack) << "too far behind";
  }
}

TEST(CoarseClockTest, DeadlinesAreJudgedByThePreciseClockNearThem) {
  EXPECT_TRUE(DeadlinePassed(absl::InfinitePast()));
  EXPECT_FALSE(DeadlinePassed(absl::InfiniteFuture()));
  EXPECT_TRUE(DeadlinePassed(absl::Now() - absl::Hours(1)));
  EXPECT_FALSE(DeadlinePassed(absl::Now() + absl::Hours(1)));
  // Passed a moment ago: the coarse clock may not show it yet; the
  // answer must.
  EXPECT_TRUE(DeadlinePassed(absl::Now() - absl::Microseconds(1)));
  const absl::Time soon = absl::Now() + absl::Milliseconds(2);
  EXPECT_FALSE(DeadlinePassed(soon));
  absl::SleepFor(absl::Milliseconds(3));
  EXPECT_TRUE(DeadlinePassed(soon));
}

// A clock of its own, as tests fake one: DeadlinePassed follows it to the
// nanosecond.
class HandClock final : public Timers {
 public:
  uint64_t RunAt(absl::Time, absl::AnyInvocable<void()>) override { return 1; }
  void Cancel(uint64_t) override {}
  absl::Time Now() const override { return now; }
  absl::Time CoarseNow() const override { return coarse; }
  absl::Time now = absl::FromUnixSeconds(1000);
  absl::Time coarse = absl::FromUnixSeconds(1000);
};

TEST(CoarseClockTest, TimersJudgeDeadlinesByTheirOwnClock) {
  HandClock clock;
  const absl::Time deadline = clock.now;
  EXPECT_TRUE(clock.DeadlinePassed(deadline));
  EXPECT_FALSE(clock.DeadlinePassed(deadline + absl::Nanoseconds(1)));
  // A coarse reading a tick behind does not hide a deadline just passed.
  clock.coarse = clock.now - absl::Milliseconds(10);
  EXPECT_TRUE(clock.DeadlinePassed(deadline - absl::Nanoseconds(1)));
  EXPECT_FALSE(clock.DeadlinePassed(deadline + absl::Milliseconds(1)));
  // Far from the deadline the precise clock is not needed: a precise clock
  // that says otherwise is not read.
  clock.now = absl::InfiniteFuture();
  EXPECT_FALSE(clock.DeadlinePassed(clock.coarse + absl::Seconds(1)));
}

}  // namespace
}  // namespace rdmad::runtime
