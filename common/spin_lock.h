// SpinLock: a lock for critical sections of a few dozen instructions that
// another thread only rarely wants at the same moment.
//
// A ring queue's lock is taken twice per round by its engine (to take
// submissions, to publish completions) and only now and then by another
// thread (a remote operation's completion). absl::Mutex costs about 170
// instructions per lock and unlock there (Debian's shared abseil: two
// calls through the PLT, its waiter bookkeeping); this costs an exchange
// and a store. A thread that finds it held spins a little with `pause`,
// then yields the CPU between looks, so a holder preempted on the same CPU
// gets to run.
//
// Never hold one across a system call, a wait or anything of unbounded
// length: waiters burn CPU.
//
// Example:
//   SpinLock mu;
//   int counter ABSL_GUARDED_BY(mu);
//   {
//     SpinLockHolder hold(&mu);
//     ++counter;
//   }
#ifndef RDMAD_COMMON_SPIN_LOCK_H_
#define RDMAD_COMMON_SPIN_LOCK_H_

#include <sched.h>

#include <atomic>

#include "absl/base/thread_annotations.h"

namespace rdmad {

class ABSL_LOCKABLE SpinLock {
 public:
  SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    LockSlow();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    locked_.store(false, std::memory_order_release);
  }

 private:
  // Pauses before the first yield: a holder that runs on another CPU is
  // done long before.
  static constexpr int kSpinsBeforeYield = 100;

  void LockSlow() {
    for (int spins = 0;; ++spins) {
      // Read until it looks free (no cache line stolen from the holder at
      // every try), then try again.
      if (!locked_.load(std::memory_order_relaxed) &&
          !locked_.exchange(true, std::memory_order_acquire)) {
        return;
      }
      if (spins < kSpinsBeforeYield) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else {
        ::sched_yield();
      }
    }
  }

  std::atomic<bool> locked_{false};
};

class ABSL_SCOPED_LOCKABLE SpinLockHolder {
 public:
  explicit SpinLockHolder(SpinLock* lock) ABSL_EXCLUSIVE_LOCK_FUNCTION(lock)
      : lock_(lock) {
    lock_->Lock();
  }
  ~SpinLockHolder() ABSL_UNLOCK_FUNCTION() { lock_->Unlock(); }
  SpinLockHolder(const SpinLockHolder&) = delete;
  SpinLockHolder& operator=(const SpinLockHolder&) = delete;

 private:
  SpinLock* const lock_;
};

}  // namespace rdmad

#endif  // RDMAD_COMMON_SPIN_LOCK_H_
