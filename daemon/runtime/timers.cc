#include "daemon/runtime/timers.h"

#include <utility>

namespace rdmad::runtime {

uint64_t LoopTimers::RunAt(absl::Time when, absl::AnyInvocable<void()> task) {
  const uint64_t id = next_id_.fetch_add(1);
  loop_->Post([this, id, when, task = std::move(task)]() mutable {
    loop_ids_[id] = loop_->RunAt(when, [this, id, task = std::move(task)]() mutable {
      loop_ids_.erase(id);
      task();
    });
  });
  return id;
}

void LoopTimers::Cancel(uint64_t id) {
  loop_->Post([this, id] {
    auto it = loop_ids_.find(id);
    if (it == loop_ids_.end()) return;
    loop_->CancelTimer(it->second);
    loop_ids_.erase(it);
  });
}

}  // namespace rdmad::runtime
