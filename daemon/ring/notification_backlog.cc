#include "daemon/ring/notification_backlog.h"

#include <utility>

namespace rdmad::ring {

bool NotificationBudget::TryTake() {
  uint64_t held = held_.load(std::memory_order_relaxed);
  while (held < limit_) {
    if (held_.compare_exchange_weak(held, held + 1,
                                    std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

NotificationBacklog::NotificationBacklog(
    std::shared_ptr<NotificationBudget> budget)
    : budget_(std::move(budget)) {}

NotificationBacklog::~NotificationBacklog() { Clear(); }

NotificationBacklog::NotificationBacklog(NotificationBacklog&& other) noexcept
    : budget_(other.budget_),
      entries_(std::move(other.entries_)),
      held_(std::exchange(other.held_, 0)),
      lost_(other.lost_) {
  other.entries_.clear();
}

NotificationBacklog& NotificationBacklog::operator=(
    NotificationBacklog&& other) noexcept {
  if (this != &other) {
    Clear();
    budget_ = other.budget_;
    entries_ = std::move(other.entries_);
    other.entries_.clear();
    held_ = std::exchange(other.held_, 0);
    lost_ = other.lost_;
  }
  return *this;
}

void NotificationBacklog::Append(PendingNotification n) {
  if (n.lost > 0 && !entries_.empty() && entries_.back().lost > 0 &&
      entries_.back().owner == n.owner) {
    entries_.back().lost += n.lost;
    return;
  }
  if (n.lost == 0) ++held_;
  entries_.push_back(std::move(n));
}

bool NotificationBacklog::Add(PendingNotification n) {
  if (budget_->TryTake()) {
    n.lost = 0;
    Append(std::move(n));
    return true;
  }
  budget_->CountLost();
  ++lost_;
  PendingNotification marker;
  marker.sequence = n.sequence;
  marker.owner = n.owner;
  marker.lost = 1;
  Append(std::move(marker));
  return false;
}

void NotificationBacklog::PopFront() {
  if (entries_.front().lost == 0) {
    --held_;
    budget_->Give(1);
  }
  entries_.pop_front();
}

void NotificationBacklog::MergeFrom(NotificationBacklog& other) {
  std::deque<PendingNotification> mine = std::move(entries_);
  std::deque<PendingNotification> theirs = std::move(other.entries_);
  entries_.clear();
  other.entries_.clear();
  held_ = 0;
  other.held_ = 0;
  while (!mine.empty() || !theirs.empty()) {
    const bool take_mine =
        theirs.empty() ||
        (!mine.empty() && mine.front().sequence <= theirs.front().sequence);
    std::deque<PendingNotification>& from = take_mine ? mine : theirs;
    Append(std::move(from.front()));
    from.pop_front();
  }
}

void NotificationBacklog::MoveOwned(NotifiedOwner owner,
                                    NotificationBacklog& to) {
  std::deque<PendingNotification> all = std::move(entries_);
  entries_.clear();
  held_ = 0;
  for (PendingNotification& n : all) {
    NotificationBacklog& into = n.owner == owner ? to : *this;
    into.Append(std::move(n));
  }
}

void NotificationBacklog::Clear() {
  if (budget_ != nullptr && held_ > 0) budget_->Give(held_);
  held_ = 0;
  entries_.clear();
}

void NotificationBacklog::Discard() {
  if (held_ > 0) budget_->CountLost(held_);
  Clear();
}

}  // namespace rdmad::ring
