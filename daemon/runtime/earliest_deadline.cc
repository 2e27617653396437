#include "daemon/runtime/earliest_deadline.h"

namespace rdmad::runtime {

void EarliestDeadline::Consider(absl::Time when) {
  if (when >= armed_) return;
  if (timer_ != 0) loop_->CancelTimer(timer_);
  armed_ = when;
  timer_ = loop_->RunAt(when, [this] {
    timer_ = 0;
    armed_ = absl::InfiniteFuture();
    on_due_();
  });
}

void EarliestDeadline::Cancel() {
  if (timer_ != 0) loop_->CancelTimer(timer_);
  timer_ = 0;
  armed_ = absl::InfiniteFuture();
}

}  // namespace rdmad::runtime
