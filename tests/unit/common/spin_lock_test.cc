// SpinLock (common/spin_lock.h): mutual exclusion under contention, more
// threads than CPUs included (a waiter must yield to a preempted holder,
// or this test takes forever on two CPUs), and what one holder wrote is
// what the next one reads.
#include "common/spin_lock.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace rdmad {
namespace {

TEST(SpinLockTest, CountsEveryIncrementOfManyThreads) {
  SpinLock mu;
  // Two words written apart: a reader that saw them differ would have run
  // inside another thread's critical section.
  uint64_t first = 0;
  uint64_t second = 0;
  bool torn = false;
  constexpr int kThreads = 8;  // more than the test machines' CPUs
  constexpr int kRounds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        SpinLockHolder hold(&mu);
        if (first != second) torn = true;
        ++first;
        ++second;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(torn);
  EXPECT_EQ(first, uint64_t{kThreads} * kRounds);
  EXPECT_EQ(second, first);
}

TEST(SpinLockTest, AWaiterGetsTheLockOnceItIsReleased) {
  SpinLock mu;
  mu.Lock();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    SpinLockHolder hold(&mu);
    got = true;
  });
  // Held: the waiter spins, then yields; it must not get in.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(got.load());
  mu.Unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
}

}  // namespace
}  // namespace rdmad
