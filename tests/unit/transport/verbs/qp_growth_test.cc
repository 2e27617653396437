// QpGrowth (daemon/transport/verbs/qp_growth.h): a pool grows only after a
// backlog that outlasts the hysteresis, by doubling up to the cap, one grow
// at a time, and waits longer after each failed grow; on a fake clock.
#include "daemon/transport/verbs/qp_growth.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace rdmad::verbs {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000000);
constexpr absl::Duration kHysteresis = absl::Milliseconds(2);
constexpr absl::Duration kRetry = absl::Milliseconds(200);

QpGrowthOptions Options(uint32_t max_qps) {
  QpGrowthOptions o;
  o.max_qps = max_qps;
  o.hysteresis = kHysteresis;
  o.retry_after = kRetry;
  o.retry_max = absl::Seconds(1);
  return o;
}

TEST(QpGrowthTest, NoBacklogNeverGrows) {
  QpGrowth growth(Options(8));
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(growth.Want(kStart + absl::Milliseconds(i), 1, false), 0u);
  }
  EXPECT_FALSE(growth.growing());
}

TEST(QpGrowthTest, BacklogShorterThanHysteresisDoesNotGrow) {
  QpGrowth growth(Options(8));
  EXPECT_EQ(growth.Want(kStart, 1, true), 0u);
  EXPECT_EQ(growth.Want(kStart + kHysteresis / 2, 1, true), 0u);
  // A completion cleared it: the next backlog is timed from its own start.
  EXPECT_EQ(growth.Want(kStart + kHysteresis / 2, 1, false), 0u);
  EXPECT_EQ(growth.Want(kStart + kHysteresis, 1, true), 0u);
  EXPECT_EQ(growth.Want(kStart + kHysteresis * 3 / 2, 1, true), 0u);
  EXPECT_EQ(growth.Want(kStart + kHysteresis * 2, 1, true), 1u);
}

TEST(QpGrowthTest, DoublesUpToTheCap) {
  QpGrowth growth(Options(6));
  absl::Time now = kStart;
  uint32_t open = 1;
  std::vector<uint32_t> sizes;
  for (int step = 0; step < 10; ++step) {
    growth.Want(now, open, true);
    now += kHysteresis;
    const uint32_t add = growth.Want(now, open, true);
    if (add == 0) break;
    EXPECT_TRUE(growth.growing());
    growth.Done(now, true);
    open += add;
    sizes.push_back(open);
  }
  EXPECT_EQ(sizes, (std::vector<uint32_t>{2, 4, 6}));
  EXPECT_EQ(growth.Want(now + absl::Seconds(10), open, true), 0u);
}

TEST(QpGrowthTest, CapOfOneNeverGrows) {
  QpGrowth growth(Options(1));
  EXPECT_EQ(growth.Want(kStart, 1, true), 0u);
  EXPECT_EQ(growth.Want(kStart + absl::Seconds(5), 1, true), 0u);
}

TEST(QpGrowthTest, OneGrowAtATime) {
  QpGrowth growth(Options(8));
  growth.Want(kStart, 1, true);
  EXPECT_EQ(growth.Want(kStart + kHysteresis, 1, true), 1u);
  // Still backlogged while the handshake runs: no second grow.
  for (int i = 1; i < 50; ++i) {
    EXPECT_EQ(growth.Want(kStart + kHysteresis + absl::Milliseconds(i), 1, true),
              0u);
  }
  growth.Done(kStart + absl::Milliseconds(60), true);
  EXPECT_FALSE(growth.growing());
  // The grown pool's backlog is timed afresh.
  EXPECT_EQ(growth.Want(kStart + absl::Milliseconds(60), 2, true), 0u);
  EXPECT_EQ(growth.Want(kStart + absl::Milliseconds(60) + kHysteresis, 2, true),
            2u);
}

TEST(QpGrowthTest, FailedGrowsBackOffAndSuccessResets) {
  QpGrowth growth(Options(8));
  absl::Time now = kStart;
  growth.Want(now, 1, true);
  now += kHysteresis;
  ASSERT_EQ(growth.Want(now, 1, true), 1u);
  // Each failure in a row doubles the wait: 200 ms, 400 ms, 800 ms, then
  // the 1 s cap.
  const absl::Duration waits[] = {kRetry, kRetry * 2, kRetry * 4,
                                  absl::Seconds(1), absl::Seconds(1)};
  for (const absl::Duration wait : waits) {
    growth.Done(now, false);
    const absl::Time failed_at = now;
    EXPECT_EQ(growth.Want(now, 1, true), 0u);
    EXPECT_EQ(growth.Want(failed_at + wait - absl::Milliseconds(1), 1, true),
              0u)
        << "wait " << wait;
    now = failed_at + wait;
    EXPECT_EQ(growth.Want(now, 1, true), 1u) << "wait " << wait;
  }
  EXPECT_EQ(growth.failures(), 5u);
  growth.Done(now, true);
  EXPECT_EQ(growth.failures(), 0u);
  growth.Want(now, 2, true);
  EXPECT_EQ(growth.Want(now + kHysteresis, 2, true), 2u);
}

TEST(QpGrowthTest, PoolThatLostItsQpsAsksForOne) {
  QpGrowth growth(Options(4));
  growth.Want(kStart, 0, true);
  EXPECT_EQ(growth.Want(kStart + kHysteresis, 0, true), 1u);
}

}  // namespace
}  // namespace rdmad::verbs
