// SpinGate (common/spin_gate.h): open while the thread is not preempted;
// a preemption closes it for a quiet period that doubles while they keep
// coming and halves again once the gate stays open without one; the
// counts are looked at no more often than kCheckEvery.
#include "common/spin_gate.h"

#include <atomic>

#include "gtest/gtest.h"

namespace rdmad {
namespace {

std::atomic<int64_t> g_preemptions{0};
std::atomic<int> g_looks{0};
int64_t StandIn() {
  g_looks++;
  return g_preemptions.load();
}

class SpinGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_preemptions = 0;
    g_looks = 0;
  }
  // Preempted once more, then a look one check period on.
  void PreemptedThenLook() {
    g_preemptions++;
    now_ += SpinGate::kCheckEvery;
    gate_.Check(now_);
  }
  absl::Time now_ = absl::FromUnixSeconds(1000);
  SpinGate gate_{&StandIn};
};

TEST_F(SpinGateTest, OpenUntilTheThreadIsPreempted) {
  gate_.Check(now_);
  EXPECT_TRUE(gate_.open(now_));
  for (int i = 0; i < 10; ++i) {
    now_ += SpinGate::kCheckEvery;
    gate_.Check(now_);
    EXPECT_TRUE(gate_.open(now_)) << "no preemption, no reason to close";
  }
  PreemptedThenLook();
  EXPECT_FALSE(gate_.open(now_));
  EXPECT_FALSE(gate_.open(now_ + SpinGate::kFirstQuiet -
                          absl::Microseconds(1)));
  EXPECT_TRUE(gate_.open(now_ + SpinGate::kFirstQuiet));
}

TEST_F(SpinGateTest, LooksNoMoreOftenThanItsPeriod) {
  gate_.Check(now_);
  const int looks = g_looks.load();
  for (int i = 0; i < 100; ++i) {
    gate_.Check(now_ + absl::Microseconds(i));
  }
  EXPECT_EQ(g_looks.load(), looks) << "a system call per wait";
  gate_.Check(now_ + SpinGate::kCheckEvery);
  EXPECT_EQ(g_looks.load(), looks + 1);
}

TEST_F(SpinGateTest, TheQuietPeriodDoublesWhilePreemptionsKeepComing) {
  gate_.Check(now_);
  absl::Duration expect = SpinGate::kFirstQuiet;
  for (int i = 0; i < 12; ++i) {
    PreemptedThenLook();
    ASSERT_FALSE(gate_.open(now_ + expect - absl::Microseconds(1))) << i;
    ASSERT_TRUE(gate_.open(now_ + expect)) << i;
    // Reopened, and preempted again at once.
    now_ += expect;
    expect = std::min(2 * expect, SpinGate::kMaxQuiet);
  }
  EXPECT_EQ(expect, SpinGate::kMaxQuiet);
}

TEST_F(SpinGateTest, StayingOpenWithoutPreemptionShortensTheQuietPeriod) {
  gate_.Check(now_);
  for (int i = 0; i < 3; ++i) {  // 20, 40, 80 ms
    PreemptedThenLook();
    now_ += SpinGate::kFirstQuiet * (1 << i);
  }
  // Open now, with the next period at 160 ms; open for that long without
  // a preemption halves it for each such look.
  now_ += absl::Milliseconds(160);
  gate_.Check(now_);
  now_ += absl::Milliseconds(160);
  gate_.Check(now_);
  PreemptedThenLook();
  EXPECT_FALSE(gate_.open(now_ + absl::Milliseconds(39)));
  EXPECT_TRUE(gate_.open(now_ + absl::Milliseconds(40)));
}

TEST_F(SpinGateTest, TheThreadsOwnYieldsAreNotPreemptions) {
  gate_.Check(now_);
  // Each yield the kernel counts as an involuntary switch.
  for (int i = 0; i < 5; ++i) {
    YieldCpu();
    g_preemptions++;
  }
  now_ += SpinGate::kCheckEvery;
  gate_.Check(now_);
  EXPECT_TRUE(gate_.open(now_)) << "five yields, five switches: its own";
  g_preemptions++;  // and one more than it yielded
  now_ += SpinGate::kCheckEvery;
  gate_.Check(now_);
  EXPECT_FALSE(gate_.open(now_));
}

TEST_F(SpinGateTest, ReadsTheThreadsOwnCount) {
  EXPECT_GE(SpinGate::ThreadPreemptions(), 0);
}

}  // namespace
}  // namespace rdmad
