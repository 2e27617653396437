// EventLoop (daemon/runtime/event_loop.h): while pollers keep it spinning
// it still serves its file descriptors, tasks and timers (it looks at the
// descriptors only every few microseconds then); when they fall idle it
// asks them to arm their wake-ups, sleeps (no longer than the timers they
// armed allow), and tells them when it woke.
#include "daemon/runtime/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <memory>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace rdmad::runtime {
namespace {

// Generous: the machine is shared; nothing here measures time.
constexpr absl::Duration kPatience = absl::Seconds(20);

// Waits until `done` returns true or kPatience passes.
template <typename F>
bool Eventually(F done) {
  const absl::Time until = absl::Now() + kPatience;
  while (!done()) {
    if (absl::Now() > until) return false;
    absl::SleepFor(absl::Microseconds(200));
  }
  return true;
}

// A poller that reports work while `busy` is set, and counts what the loop
// asked of it.
class CountingPoller : public Poller {
 public:
  bool Poll() override {
    polls.fetch_add(1);
    return busy.load();
  }
  bool PrepareToSleep() override {
    prepares.fetch_add(1);
    // Work that arrived just before the loop would have slept.
    if (work_at_prepare.exchange(false)) busy = true;
    return busy.load();
  }
  void Woke() override { wakes.fetch_add(1); }

  std::atomic<bool> busy{false};
  std::atomic<bool> work_at_prepare{false};
  std::atomic<uint64_t> polls{0};
  std::atomic<uint64_t> prepares{0};
  std::atomic<uint64_t> wakes{0};
};

class EventLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = EventLoop::Create("test-loop",
                                  {.spin = absl::Microseconds(50)});
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = *std::move(loop);
    loop_->Start();
  }
  void TearDown() override {
    if (poller_added_) {
      ASSERT_TRUE(RunOnLoop(loop_.get(), [this] {
                    loop_->RemovePoller(&poller_);
                    return absl::OkStatus();
                  }).ok());
    }
    loop_->Stop();
  }
  void AddPoller() {
    ASSERT_TRUE(RunOnLoop(loop_.get(), [this] {
                  loop_->AddPoller(&poller_);
                  return absl::OkStatus();
                }).ok());
    poller_added_ = true;
  }

  std::unique_ptr<EventLoop> loop_;
  CountingPoller poller_;
  bool poller_added_ = false;
};

TEST_F(EventLoopTest, DescriptorsAreServedWhilePollersKeepItSpinning) {
  poller_.busy = true;
  AddPoller();
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::atomic<int> readable{0};
  absl::StatusOr<uint64_t> watch = absl::InternalError("not run");
  ASSERT_TRUE(RunOnLoop(loop_.get(), [&] {
                watch = loop_->Watch(fd, EPOLLIN, [&](uint32_t) {
                  uint64_t n;
                  [[maybe_unused]] ssize_t r = ::read(fd, &n, sizeof(n));
                  readable.fetch_add(1);
                });
                return watch.status();
              }).ok());
  for (int i = 1; i <= 3; ++i) {
    const uint64_t one = 1;
    ASSERT_EQ(::write(fd, &one, sizeof(one)), 8);
    EXPECT_TRUE(Eventually([&] { return readable.load() >= i; }))
        << "a spinning loop never looked at its descriptors";
  }
  EXPECT_EQ(poller_.wakes.load(), 0u) << "it never slept";
  ASSERT_TRUE(RunOnLoop(loop_.get(), [&] {
                loop_->Unwatch(*watch);
                return absl::OkStatus();
              }).ok());
  ::close(fd);
}

TEST_F(EventLoopTest, TasksAndTimersRunWhilePollersKeepItSpinning) {
  poller_.busy = true;
  AddPoller();
  const uint64_t polls_before = poller_.polls.load();
  absl::Notification task_ran, timer_ran;
  ASSERT_TRUE(loop_->Post([&] {
    loop_->RunAt(absl::Now() + absl::Milliseconds(2),
                 [&] { timer_ran.Notify(); });
    task_ran.Notify();
  }));
  EXPECT_TRUE(task_ran.WaitForNotificationWithTimeout(kPatience));
  EXPECT_TRUE(timer_ran.WaitForNotificationWithTimeout(kPatience));
  EXPECT_GT(poller_.polls.load(), polls_before);
}

TEST_F(EventLoopTest, IdlePollersAreAskedToArmThenToldOfTheWakeUp) {
  poller_.busy = true;
  AddPoller();
  ASSERT_TRUE(Eventually([&] { return poller_.polls.load() > 10; }));
  poller_.busy = false;
  // After its spin time the loop prepares to sleep, and sleeps.
  ASSERT_TRUE(Eventually([&] { return poller_.prepares.load() > 0; }));
  const uint64_t wakes_before = poller_.wakes.load();
  // A task wakes it; then it tells the poller it slept.
  absl::Notification ran;
  ASSERT_TRUE(loop_->Post([&] { ran.Notify(); }));
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(kPatience));
  EXPECT_TRUE(Eventually([&] { return poller_.wakes.load() > wakes_before; }));
}

TEST_F(EventLoopTest, APollerThatFindsWorkWhilePreparingKeepsItAwake) {
  AddPoller();
  ASSERT_TRUE(Eventually([&] { return poller_.prepares.load() > 0; }));
  // Asleep now. Woken by a task, it spins, and when it prepares to sleep
  // again the poller has work: it must spin on instead of sleeping.
  poller_.work_at_prepare = true;
  absl::Notification ran;
  ASSERT_TRUE(loop_->Post([&] { ran.Notify(); }));
  ASSERT_TRUE(ran.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(Eventually([&] { return poller_.busy.load(); }));
  uint64_t polls = poller_.polls.load();
  ASSERT_TRUE(Eventually([&] { return poller_.polls.load() > polls + 1000; }));
  const uint64_t wakes = poller_.wakes.load();
  polls = poller_.polls.load();
  ASSERT_TRUE(Eventually([&] { return poller_.polls.load() > polls + 1000; }));
  EXPECT_EQ(poller_.wakes.load(), wakes) << "the loop slept with work waiting";
}

// A loop that does not spin (spin 0, or a CPU it shares: common/
// spin_gate.h) must still not sleep when a poller found work as it
// prepared to: that poller armed no wake-up.
TEST(EventLoopNoSpinTest, APollerThatFindsWorkWhilePreparingKeepsItAwake) {
  auto loop = EventLoop::Create("no-spin", {.spin = absl::ZeroDuration()});
  ASSERT_TRUE(loop.ok()) << loop.status();
  (*loop)->Start();
  CountingPoller poller;
  ASSERT_TRUE(RunOnLoop(loop->get(), [&] {
                (*loop)->AddPoller(&poller);
                return absl::OkStatus();
              }).ok());
  ASSERT_TRUE(Eventually([&] { return poller.prepares.load() > 0; }));
  poller.work_at_prepare = true;
  absl::Notification ran;
  ASSERT_TRUE((*loop)->Post([&] { ran.Notify(); }));
  ASSERT_TRUE(ran.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(Eventually([&] { return poller.busy.load(); }));
  // It sleeps at most a second at a time: a loop that slept with the
  // work waiting would take minutes for these polls.
  const uint64_t polls = poller.polls.load();
  EXPECT_TRUE(Eventually([&] { return poller.polls.load() > polls + 1000; }))
      << "the loop slept with work waiting";
  poller.busy = false;
  ASSERT_TRUE(RunOnLoop(loop->get(), [&] {
                (*loop)->RemovePoller(&poller);
                return absl::OkStatus();
              }).ok());
  (*loop)->Stop();
}

// A poller that, each time the loop is about to sleep, arms a timer 10 ms
// ahead (as a stalled ring queue does), `times` times over.
class ArmingPoller : public Poller {
 public:
  ArmingPoller(EventLoop* loop, int times) : loop_(loop), left_(times) {}
  bool Poll() override { return false; }
  bool PrepareToSleep() override {
    if (left_ > 0 && !armed_) {
      armed_ = true;
      --left_;
      loop_->RunAt(absl::Now() + absl::Milliseconds(10), [this] {
        armed_ = false;
        fired.fetch_add(1);
      });
    }
    return false;
  }
  void Woke() override {}

  std::atomic<int> fired{0};

 private:
  EventLoop* const loop_;
  int left_;            // loop thread only
  bool armed_ = false;  // loop thread only
};

// A timer a poller arms as the loop goes to sleep bounds that very sleep:
// five 10 ms timers in a row take tens of milliseconds, not five of the
// loop's longest sleeps (1 s each).
TEST_F(EventLoopTest, ATimerArmedBeforeSleepingBoundsTheSleep) {
  ArmingPoller arming(loop_.get(), 5);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(RunOnLoop(loop_.get(), [&] {
                loop_->AddPoller(&arming);
                return absl::OkStatus();
              }).ok());
  EXPECT_TRUE(Eventually([&] { return arming.fired.load() == 5; }));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(2500))
      << "the loop slept past the timers its poller armed";
  ASSERT_TRUE(RunOnLoop(loop_.get(), [&] {
                loop_->RemovePoller(&arming);
                return absl::OkStatus();
              }).ok());
}

}  // namespace
}  // namespace rdmad::runtime
