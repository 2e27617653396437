// Timers: deadlines as timers, for code that waits on something with a
// deadline but does not live on an event loop (the peer layer's waiters).
// LoopTimers runs them on one loop of the IoRuntime; tests use a fake
// clock they advance by hand.
#ifndef RDMAD_DAEMON_RUNTIME_TIMERS_H_
#define RDMAD_DAEMON_RUNTIME_TIMERS_H_

#include <atomic>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "daemon/runtime/coarse_clock.h"
#include "daemon/runtime/event_loop.h"

namespace rdmad::runtime {

// Thread-safe.
class Timers {
 public:
  virtual ~Timers() = default;
  // Runs `task` at `when` (soon, if past), on the timers' own thread.
  // Returns an id for Cancel; never 0.
  virtual uint64_t RunAt(absl::Time when, absl::AnyInvocable<void()> task) = 0;
  // Drops the timer if it has not run. A timer may still run concurrently
  // with or just after Cancel: what it does must be harmless then.
  virtual void Cancel(uint64_t id) = 0;
  // The clock the timers run by.
  virtual absl::Time Now() const { return absl::Now(); }
  // The same clock read cheaply (runtime::CoarseNow): never ahead of Now(),
  // behind it by less than kCoarseClockSlack. A clock that overrides Now()
  // overrides this too.
  virtual absl::Time CoarseNow() const { return runtime::CoarseNow(); }
  // Whether `deadline` has passed by Now(), which is read only near it.
  bool DeadlinePassed(absl::Time deadline) const {
    return DeadlinePassedBy(deadline, CoarseNow(), [this] { return Now(); });
  }
};

// Timers on one event loop (not owned; must outlive the timers' use).
class LoopTimers final : public Timers {
 public:
  explicit LoopTimers(EventLoop* loop) : loop_(loop) {}
  uint64_t RunAt(absl::Time when, absl::AnyInvocable<void()> task) override;
  void Cancel(uint64_t id) override;

 private:
  EventLoop* const loop_;
  std::atomic<uint64_t> next_id_{1};
  // Our ids to the loop's, touched only on the loop.
  absl::flat_hash_map<uint64_t, uint64_t> loop_ids_;
};

}  // namespace rdmad::runtime

#endif  // RDMAD_DAEMON_RUNTIME_TIMERS_H_
