// The listeners' backoff when accept fails for want of descriptors
// (daemon/runtime/accept_backoff.h).
#include "daemon/runtime/accept_backoff.h"

#include "gtest/gtest.h"

namespace rdmad::runtime {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(AcceptBackoffTest, PausesDoubleUpToASecondAndResetOnSuccess) {
  AcceptBackoff backoff;
  EXPECT_FALSE(backoff.Paused(kStart));
  absl::Time now = kStart;
  absl::Duration expected = absl::Milliseconds(10);
  for (int i = 0; i < 10; ++i) {
    backoff.Failed(now);
    EXPECT_EQ(backoff.pause(), expected) << i;
    EXPECT_TRUE(backoff.Paused(now));
    EXPECT_TRUE(backoff.Paused(now + expected - absl::Nanoseconds(1)));
    EXPECT_FALSE(backoff.Paused(now + expected));
    EXPECT_EQ(backoff.resume_at(), now + expected);
    now += expected;
    expected = std::min(expected * 2, absl::Seconds(1));
  }
  EXPECT_EQ(backoff.pause(), absl::Seconds(1));
  backoff.Succeeded();
  EXPECT_FALSE(backoff.Paused(now));
  backoff.Failed(now);
  EXPECT_EQ(backoff.pause(), absl::Milliseconds(10));
}

TEST(AcceptBackoffTest, PollTimeoutEndsThePauseRoundedUp) {
  AcceptBackoff backoff;
  EXPECT_EQ(backoff.PollTimeoutMs(kStart), -1) << "not paused: no timeout";
  backoff.Failed(kStart);  // 10 ms
  EXPECT_EQ(backoff.PollTimeoutMs(kStart), 10);
  EXPECT_EQ(backoff.PollTimeoutMs(kStart + absl::Microseconds(9001)), 1)
      << "never woken before the pause ends";
  EXPECT_EQ(backoff.PollTimeoutMs(kStart + absl::Milliseconds(10)), -1);
}

TEST(AcceptBackoffTest, LogsOneLinePerIntervalCountingTheRest) {
  AcceptBackoff backoff;
  backoff.Failed(kStart);
  EXPECT_EQ(backoff.TakeLogTurn(kStart), 0u);  // the first is logged
  absl::Time now = kStart;
  for (int i = 0; i < 5; ++i) {
    now += absl::Seconds(1);
    backoff.Failed(now);
    EXPECT_EQ(backoff.TakeLogTurn(now), std::nullopt);
  }
  now = kStart + AcceptBackoff::kLogInterval;
  backoff.Failed(now);
  EXPECT_EQ(backoff.TakeLogTurn(now), 5u);  // the five not logged
  EXPECT_EQ(backoff.TakeLogTurn(now + absl::Seconds(1)), std::nullopt);
}

}  // namespace
}  // namespace rdmad::runtime
