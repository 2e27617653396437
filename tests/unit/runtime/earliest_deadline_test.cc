// EarliestDeadline (daemon/runtime/earliest_deadline.h): one loop timer for
// many deadlines; only an earlier deadline re-arms it, it fires once for
// what is due, and its handler may arm it again.
#include "daemon/runtime/earliest_deadline.h"

#include <atomic>
#include <memory>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace rdmad::runtime {
namespace {

// Generous: the machine is shared; nothing here measures time.
constexpr absl::Duration kWaitLimit = absl::Seconds(20);

class EarliestDeadlineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = EventLoop::Create("test-loop", {});
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = *std::move(loop);
    loop_->Start();
    deadline_ = std::make_unique<EarliestDeadline>(loop_.get(), [this] {
      if (fired_.fetch_add(1) == 0 && again_) {
        deadline_->Consider(absl::Now() + absl::Milliseconds(5));
        return;
      }
      done_.Notify();
    });
  }
  void TearDown() override {
    OnLoop([this] { deadline_->Cancel(); });
    loop_->Stop();
  }
  // Runs `fn` on the loop thread, as the timer's owner must.
  template <typename F>
  void OnLoop(F fn) {
    ASSERT_TRUE(RunOnLoop(loop_.get(), [&fn] {
                  fn();
                  return absl::OkStatus();
                }).ok());
  }
  absl::Time Armed() {
    absl::Time armed;
    OnLoop([&] { armed = deadline_->armed(); });
    return armed;
  }

  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<EarliestDeadline> deadline_;
  std::atomic<int> fired_{0};
  bool again_ = false;
  absl::Notification done_;
};

TEST_F(EarliestDeadlineTest, OnlyAnEarlierDeadlineReArmsTheTimer) {
  const absl::Time now = absl::Now();
  OnLoop([&] { deadline_->Consider(now + absl::Hours(1)); });
  EXPECT_EQ(Armed(), now + absl::Hours(1));
  OnLoop([&] { deadline_->Consider(now + absl::Hours(2)); });
  EXPECT_EQ(Armed(), now + absl::Hours(1)) << "a later deadline re-armed it";
  OnLoop([&] { deadline_->Consider(absl::InfiniteFuture()); });
  EXPECT_EQ(Armed(), now + absl::Hours(1));
  OnLoop([&] { deadline_->Consider(now + absl::Milliseconds(10)); });
  ASSERT_TRUE(done_.WaitForNotificationWithTimeout(kWaitLimit))
      << "the earlier deadline never fired";
  EXPECT_EQ(fired_.load(), 1) << "one timer, fired once";
  EXPECT_EQ(Armed(), absl::InfiniteFuture()) << "disarmed once fired";
}

TEST_F(EarliestDeadlineTest, TheHandlerMayArmItAgain) {
  again_ = true;
  OnLoop([&] { deadline_->Consider(absl::Now() + absl::Milliseconds(5)); });
  ASSERT_TRUE(done_.WaitForNotificationWithTimeout(kWaitLimit));
  EXPECT_EQ(fired_.load(), 2);
}

TEST_F(EarliestDeadlineTest, ACancelledTimerDoesNotFire) {
  OnLoop([&] {
    deadline_->Consider(absl::Now() + absl::Milliseconds(20));
    deadline_->Cancel();
  });
  EXPECT_EQ(Armed(), absl::InfiniteFuture());
  // Past the deadline (a fire only comes late on a busy machine, never
  // early, so this cannot fail spuriously).
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(fired_.load(), 0);
  // Cancelled, it arms again for any deadline.
  OnLoop([&] { deadline_->Consider(absl::Now() + absl::Milliseconds(5)); });
  ASSERT_TRUE(done_.WaitForNotificationWithTimeout(kWaitLimit));
  EXPECT_EQ(fired_.load(), 1);
}

}  // namespace
}  // namespace rdmad::runtime
