// NotificationBacklog: the notifications the daemon holds for one receiver
// until its completion ring has room to spare for them (a notification
// queue whose client is behind), or until it has a receiver at all (an
// owner with no notification queue open); and NotificationBudget, the bound
// that every backlog of one uid shares.
//
// A backlog is a FIFO of notifications and loss markers. A notification
// that finds its uid's budget spent is not kept: it is counted in a marker
// at the tail (one marker for a run of them), so that the receiver learns,
// in order with the others, how many it lost (queue_layout.h,
// kNotificationsLost). A marker takes no budget; as a run of losses makes
// one marker, a backlog never holds more markers than notifications plus
// one. Memory is therefore bounded by the budget: at most
// 2 x NotificationBudget::limit() + 1 entries per uid and receiver, of
// sizeof(PendingNotification) each, plus one writer address per connection
// (shared).
//
// Every entry carries the daemon-wide sequence of its arrival, so that the
// backlogs of two owners can be merged in order (MergeFrom: a notification
// queue that opens takes what its session and its uid held).
//
// A backlog is not thread-safe: its owner (a RingQueue, or the
// QueueRegistry for owners without a queue) serializes it. A budget is
// thread-safe.
#ifndef RDMAD_DAEMON_RING_NOTIFICATION_BACKLOG_H_
#define RDMAD_DAEMON_RING_NOTIFICATION_BACKLOG_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "daemon/core/transport_kind.h"

namespace rdmad::ring {

// Who a notification is for, which decides where it goes when its queue
// closes (QueueRegistry): the session that owns a session buffer, or every
// notification queue of the uid that owns a daemon-owned region.
enum class NotifiedOwner : uint8_t { kSession, kUid };

// One held notification, or (lost > 0) a loss marker.
struct PendingNotification {
  uint64_t sequence = 0;  // daemon-wide order of arrival
  NotifiedOwner owner = NotifiedOwner::kUid;
  uint64_t region = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t immediate = 0;
  core::TransportKind transport = core::TransportKind::kLocal;
  std::optional<uint32_t> writer_uid;
  std::shared_ptr<const std::string> writer;  // Peer address; never null
  // A loss marker: this many notifications were lost here.
  uint64_t lost = 0;
};

// The notifications one uid's backlogs may hold together, and what they
// lost. Thread-safe.
class NotificationBudget {
 public:
  NotificationBudget(uint32_t uid, uint64_t limit) : uid_(uid), limit_(limit) {}
  uint32_t uid() const { return uid_; }
  uint64_t limit() const { return limit_; }
  // One notification more, if the limit allows.
  bool TryTake();
  void Give(uint64_t n) { held_.fetch_sub(n, std::memory_order_relaxed); }
  void CountLost(uint64_t n = 1) {
    lost_.fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t held() const { return held_.load(std::memory_order_relaxed); }
  uint64_t lost() const { return lost_.load(std::memory_order_relaxed); }

 private:
  const uint32_t uid_;
  const uint64_t limit_;
  std::atomic<uint64_t> held_{0};
  std::atomic<uint64_t> lost_{0};
};

class NotificationBacklog {
 public:
  // `budget` is the owner uid's (shared; not null).
  explicit NotificationBacklog(std::shared_ptr<NotificationBudget> budget);
  ~NotificationBacklog();  // gives back what it holds
  NotificationBacklog(NotificationBacklog&& other) noexcept;
  NotificationBacklog& operator=(NotificationBacklog&& other) noexcept;
  NotificationBacklog(const NotificationBacklog&) = delete;

  // Appends `n` (not a marker), or, when the budget is spent, counts it
  // lost in the marker at the tail. True if it was kept.
  bool Add(PendingNotification n);
  bool empty() const { return entries_.empty(); }
  // Entries waiting: notifications and loss markers.
  size_t entries() const { return entries_.size(); }
  // Notifications held (markers not counted).
  uint64_t held() const { return held_; }
  // The uid whose budget it draws on.
  uint32_t uid() const { return budget_->uid(); }
  // Notifications this backlog counted lost since it was made.
  uint64_t lost() const { return lost_; }
  const PendingNotification& front() const { return entries_.front(); }
  void PopFront();
  // Moves every entry of `other` (of the same uid's budget) in, merged by
  // sequence; adjacent markers of one owner become one.
  void MergeFrom(NotificationBacklog& other);
  // Moves the entries for `owner` into `to` (same budget), in order.
  void MoveOwned(NotifiedOwner owner, NotificationBacklog& to);
  // Drops everything, giving the budget back.
  void Clear();
  // Drops everything as lost (its receiver is gone): the notifications it
  // held are counted lost in the budget, then Clear.
  void Discard();

 private:
  // Appends, joining a marker to a marker of the same owner at the tail.
  void Append(PendingNotification n);

  std::shared_ptr<NotificationBudget> budget_;
  std::deque<PendingNotification> entries_;
  uint64_t held_ = 0;
  uint64_t lost_ = 0;
};

}  // namespace rdmad::ring

#endif  // RDMAD_DAEMON_RING_NOTIFICATION_BACKLOG_H_
