// CpuStepAside: when an engine thread moves off a CPU its client waits on,
// how often it may, and that a move keeps the thread's own affinity.
#include "daemon/ring/cpu_step_aside.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tests/thread_migrations.h"

namespace rdmad::ring {
namespace {

using ::rdmad::testing::ThreadMigrations;

// The CPUs a stand-in mover was asked to leave; what it answers.
std::vector<int> g_moves_asked;
bool g_move_works = true;

bool FakeMoveOff(int cpu) {
  g_moves_asked.push_back(cpu);
  return g_move_works;
}

class CpuStepAsideTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_moves_asked.clear();
    g_move_works = true;
  }
  // `n` yields at `when`; true if any of them moved.
  bool YieldTimes(CpuStepAside& aside, int n, absl::Time when) {
    bool moved = false;
    for (int i = 0; i < n; ++i) moved |= aside.Yielded(when);
    return moved;
  }
  const absl::Time t0_ = absl::FromUnixSeconds(1000);
};

TEST_F(CpuStepAsideTest, MovesAfterEnoughYieldsWithinTheWindow) {
  CpuStepAside aside(&FakeMoveOff);
  EXPECT_FALSE(YieldTimes(aside, CpuStepAside::kYieldsBeforeMove - 1, t0_));
  EXPECT_TRUE(g_moves_asked.empty()) << "a few yields are no reason to move";
  EXPECT_TRUE(aside.Yielded(t0_));
  ASSERT_EQ(g_moves_asked.size(), 1u);
  EXPECT_EQ(aside.moves(), 1u);
}

TEST_F(CpuStepAsideTest, YieldsSpreadOverMoreThanTheWindowDoNotAddUp) {
  CpuStepAside aside(&FakeMoveOff);
  absl::Time t = t0_;
  // One yield per window and a bit: each starts the count again.
  for (int i = 0; i < 2 * CpuStepAside::kYieldsBeforeMove; ++i) {
    EXPECT_FALSE(aside.Yielded(t));
    t += CpuStepAside::kWindow + absl::Milliseconds(1);
  }
  EXPECT_TRUE(g_moves_asked.empty());
}

TEST_F(CpuStepAsideTest, PausesDoubleUntilTheThreadSleeps) {
  CpuStepAside aside(&FakeMoveOff);
  ASSERT_TRUE(YieldTimes(aside, CpuStepAside::kYieldsBeforeMove, t0_));
  EXPECT_EQ(aside.pause(), CpuStepAside::kFirstPause);
  // Within the pause: not even counted.
  absl::Time t = t0_ + CpuStepAside::kFirstPause / 2;
  EXPECT_FALSE(YieldTimes(aside, 10 * CpuStepAside::kYieldsBeforeMove, t));
  EXPECT_EQ(g_moves_asked.size(), 1u);
  // Needed again without a sleep in between: clients everywhere, back off.
  t = t0_ + CpuStepAside::kFirstPause;
  ASSERT_TRUE(YieldTimes(aside, CpuStepAside::kYieldsBeforeMove, t));
  EXPECT_EQ(aside.pause(), 2 * CpuStepAside::kFirstPause);
  t += 2 * CpuStepAside::kFirstPause;
  ASSERT_TRUE(YieldTimes(aside, CpuStepAside::kYieldsBeforeMove, t));
  EXPECT_EQ(aside.pause(), 4 * CpuStepAside::kFirstPause);
  for (int i = 0; i < 20; ++i) {
    t += aside.pause();
    ASSERT_TRUE(YieldTimes(aside, CpuStepAside::kYieldsBeforeMove, t));
  }
  EXPECT_EQ(aside.pause(), CpuStepAside::kMaxPause) << "bounded";
  // A sleep (the client went quiet, and woke it on its CPU again): the
  // next move comes after the first pause.
  aside.Slept();
  t += aside.pause();
  ASSERT_TRUE(YieldTimes(aside, CpuStepAside::kYieldsBeforeMove, t));
  EXPECT_EQ(aside.pause(), CpuStepAside::kFirstPause);
}

TEST_F(CpuStepAsideTest, AMoveThatFailsIsNotRetriedAtEveryYield) {
  g_move_works = false;
  CpuStepAside aside(&FakeMoveOff);
  EXPECT_FALSE(YieldTimes(aside, 5 * CpuStepAside::kYieldsBeforeMove, t0_));
  EXPECT_EQ(g_moves_asked.size(), 1u);
  EXPECT_EQ(aside.moves(), 0u);
  // After the pause it is tried again, and backs off as a move would.
  EXPECT_FALSE(YieldTimes(aside, CpuStepAside::kYieldsBeforeMove,
                          t0_ + CpuStepAside::kFirstPause));
  EXPECT_EQ(g_moves_asked.size(), 2u);
  EXPECT_EQ(aside.pause(), 2 * CpuStepAside::kFirstPause);
}

// Restores the calling thread's affinity when it goes.
class AffinityGuard {
 public:
  AffinityGuard() {
    ::pthread_getaffinity_np(::pthread_self(), sizeof(saved_), &saved_);
  }
  ~AffinityGuard() {
    ::pthread_setaffinity_np(::pthread_self(), sizeof(saved_), &saved_);
  }
  const cpu_set_t& saved() const { return saved_; }

 private:
  cpu_set_t saved_;
};

cpu_set_t Affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  ::pthread_getaffinity_np(::pthread_self(), sizeof(set), &set);
  return set;
}

TEST(CpuStepAsideMoveOffTest, LeavesTheCpuAndKeepsTheAffinity) {
  AffinityGuard guard;
  // Two CPUs this thread may use: the one it is on and another.
  const int here = ::sched_getcpu();
  int other = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE && other < 0; ++cpu) {
    if (cpu != here && CPU_ISSET(cpu, &guard.saved())) other = cpu;
  }
  if (other < 0) GTEST_SKIP() << "this process may use one CPU only";
  cpu_set_t two;
  CPU_ZERO(&two);
  CPU_SET(here, &two);
  CPU_SET(other, &two);
  ASSERT_EQ(::pthread_setaffinity_np(::pthread_self(), sizeof(two), &two), 0);
  // The kernel moves the thread before the first sched_setaffinity returns,
  // which its migration count shows every time; but once the affinity is
  // restored a busy machine's load balancer may move it back before it
  // reads its CPU, so of the CPUs it reads one elsewhere is enough.
  const pid_t self = ::getpid();
  const pid_t tid = ::gettid();
  int seen_elsewhere = 0;
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int64_t migrations = ThreadMigrations(self, tid);
    const int from = ::sched_getcpu();
    ASSERT_TRUE(CpuStepAside::MoveOff(from));
    if (::sched_getcpu() != from) ++seen_elsewhere;
    if (migrations >= 0) {
      EXPECT_GT(ThreadMigrations(self, tid), migrations)
          << "MoveOff(" << from << ") left the thread where it was";
    }
    const cpu_set_t after = Affinity();
    ASSERT_TRUE(CPU_EQUAL(&after, &two)) << "the affinity it had, restored";
  }
  EXPECT_GT(seen_elsewhere, 0) << "the kernel moves it at once";
}

TEST(CpuStepAsideMoveOffTest, AThreadAllowedOneCpuStays) {
  AffinityGuard guard;
  const int here = ::sched_getcpu();
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(here, &one);
  ASSERT_EQ(::pthread_setaffinity_np(::pthread_self(), sizeof(one), &one), 0);
  EXPECT_FALSE(CpuStepAside::MoveOff(here));
  EXPECT_EQ(::sched_getcpu(), here);
  const cpu_set_t after = Affinity();
  EXPECT_TRUE(CPU_EQUAL(&after, &one));
  // A CPU it is not on, nor allowed: nothing to leave.
  EXPECT_FALSE(CpuStepAside::MoveOff(here + 1));
}

}  // namespace
}  // namespace rdmad::ring
