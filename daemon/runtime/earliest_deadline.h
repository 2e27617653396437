// EarliestDeadline: one event-loop timer standing for the deadlines of many
// operations. A data channel keeps a deadline per operation in flight; a
// loop timer armed and cancelled for each would cost an allocation, a heap
// insert and an erase per operation, more than the rest of a small
// operation's bookkeeping. Instead the channel tells this timer every
// deadline (Consider): it stays armed for the earliest one it was told of,
// and a deadline that is not earlier costs one comparison, which with the
// usual uniform timeouts is every one after the first. When it fires it
// calls `on_due` once, which fails what is due and Considers the earliest
// deadline left (an operation that finished in the meantime just makes it
// fire early and find nothing due).
//
// Loop thread only. The owner calls Cancel when it stops (it must not run
// `on_due` after that); without Cancel, the loop must have stopped running
// timers before this is destroyed.
#ifndef RDMAD_DAEMON_RUNTIME_EARLIEST_DEADLINE_H_
#define RDMAD_DAEMON_RUNTIME_EARLIEST_DEADLINE_H_

#include <cstdint>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "daemon/runtime/event_loop.h"

namespace rdmad::runtime {

class EarliestDeadline {
 public:
  // `loop` is not owned and must outlive this.
  EarliestDeadline(EventLoop* loop, absl::AnyInvocable<void()> on_due)
      : loop_(loop), on_due_(std::move(on_due)) {}
  EarliestDeadline(const EarliestDeadline&) = delete;
  EarliestDeadline& operator=(const EarliestDeadline&) = delete;

  // Arms the timer for `when` if that is earlier than the armed time (an
  // InfiniteFuture deadline never arms it).
  void Consider(absl::Time when);
  // Disarms the timer.
  void Cancel();
  // When the timer fires; InfiniteFuture when it is not armed.
  absl::Time armed() const { return armed_; }

 private:
  EventLoop* const loop_;
  absl::AnyInvocable<void()> on_due_;
  uint64_t timer_ = 0;  // the loop's id, 0 when not armed
  absl::Time armed_ = absl::InfiniteFuture();
};

}  // namespace rdmad::runtime

#endif  // RDMAD_DAEMON_RUNTIME_EARLIEST_DEADLINE_H_
