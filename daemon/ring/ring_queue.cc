#include "daemon/ring/ring_queue.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace rdmad::ring {
namespace {

absl::StatusOr<UniqueFd> NewEventFd() {
  UniqueFd fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, "eventfd");
  return fd;
}

// The queue whose round the calling thread is in (RingQueue::BeginRound):
// its completions are deferred to EndRound.
thread_local const RingQueue* t_round_queue = nullptr;
// Set when this thread completed work for a client waiting on its own CPU
// (TakeYieldHint).
thread_local RingQueue::YieldHint t_yield_hint = RingQueue::YieldHint::kNone;

queue::CompletionTransport RingTransport(core::TransportKind kind) {
  switch (kind) {
    case core::TransportKind::kVerbs:
      return queue::CompletionTransport::kVerbs;
    case core::TransportKind::kTcp:
      return queue::CompletionTransport::kTcp;
    case core::TransportKind::kLocal:
      return queue::CompletionTransport::kLocal;
    case core::TransportKind::kNone:
      break;
  }
  return queue::CompletionTransport::kUnknown;
}

uint8_t TransportCode(core::TransportKind kind) {
  return static_cast<uint8_t>(RingTransport(kind));
}

}  // namespace

absl::StatusOr<std::shared_ptr<RingQueue>> RingQueue::Create(
    uint64_t id, const core::Caller& caller,
    std::shared_ptr<RemoteHandles> handles, const RingQueueOptions& options) {
  const queue::Geometry geometry = queue::GeometryFor(
      options.submission_entries, options.completion_entries);
  RDMAD_ASSIGN_OR_RETURN(
      core::ShmSegment segment,
      core::ShmSegment::Create(absl::StrCat("rdmad-queue-", id),
                               geometry.total_size));
  queue::InitializeSegment(segment.data(), geometry);
  RDMAD_ASSIGN_OR_RETURN(UniqueFd doorbell, NewEventFd());
  RDMAD_ASSIGN_OR_RETURN(UniqueFd wakeup, NewEventFd());
  return std::shared_ptr<RingQueue>(new RingQueue(
      id, caller, std::move(handles), options, geometry, std::move(segment),
      std::move(doorbell), std::move(wakeup)));
}

RingQueue::RingQueue(uint64_t id, const core::Caller& caller,
                     std::shared_ptr<RemoteHandles> handles,
                     RingQueueOptions options, queue::Geometry geometry,
                     core::ShmSegment segment, UniqueFd doorbell,
                     UniqueFd wakeup)
    : id_(id),
      caller_(caller),
      handles_(std::move(handles)),
      options_(options),
      geometry_(geometry),
      segment_(std::move(segment)),
      doorbell_(std::move(doorbell)),
      wakeup_(std::move(wakeup)),
      submissions_(segment_.data(), geometry_),
      completions_(segment_.data(), geometry_) {}

size_t RingQueue::Take(absl::Span<queue::SubmissionEntry> out) {
  if (stopped()) return 0;
  // Nothing published, the usual answer to a spinning engine: one load of
  // the next entry's sequence, no lock.
  if (absl::StatusOr<bool> ready = submissions_.Ready(); !ready.ok()) {
    Stop(ready.status());
    return 0;
  } else if (!*ready) {
    return 0;
  }
  absl::Status bad;
  size_t taken = 0;
  {
    // Completions may be published from other threads meanwhile; copying
    // a round's entries under the lock holds them up for nanoseconds.
    SpinLockHolder lock(&mu_);
    // Room for one more is all a round needs: the client's head (a line
    // its core wrote) is read only when the room seen last runs out, not
    // every round (asking for a whole round's budget would read it every
    // time the completion ring is smaller than that).
    const uint32_t want = in_flight_ + 1;
    absl::StatusOr<uint32_t> space = completions_.Space(want);
    if (!space.ok()) {
      bad = space.status();
    } else if (*space > in_flight_) {
      const size_t room = *space - in_flight_;
      absl::StatusOr<size_t> took =
          submissions_.Take(out.subspan(0, std::min(room, out.size())));
      if (took.ok()) {
        taken = *took;
        in_flight_ += static_cast<uint32_t>(taken);
        submitted_ += taken;
      } else {
        bad = took.status();
      }
    }
    // else: the client has not consumed its completions (back-pressure).
  }
  if (!bad.ok()) Stop(bad);
  return taken;
}

RingQueue::SleepCheck RingQueue::SleepUnlessWork() {
  if (stopped()) return SleepCheck::kSleep;
  absl::StatusOr<bool> work = submissions_.SleepUnlessWork();
  if (!work.ok()) {
    Stop(work.status());
    return SleepCheck::kSleep;
  }
  if (!*work) return SleepCheck::kSleep;
  absl::Status bad;
  bool room = false;
  {
    // As Take decides: room for one more than is in flight.
    SpinLockHolder lock(&mu_);
    absl::StatusOr<uint32_t> space = completions_.Space(in_flight_ + 1);
    if (space.ok()) {
      room = *space > in_flight_;
    } else {
      bad = space.status();
    }
  }
  if (!bad.ok()) {
    Stop(bad);
    return SleepCheck::kSleep;
  }
  if (room) return SleepCheck::kWork;
  // Asleep for the client again (SleepUnlessWork cleared it on seeing the
  // entry), so that what it submits after making room rings the doorbell.
  submissions_.Asleep();
  return SleepCheck::kStalled;
}

void RingQueue::Awake() { submissions_.Awake(); }

void RingQueue::ClearDoorbell() {
  uint64_t count;
  [[maybe_unused]] ssize_t n = ::read(doorbell_.get(), &count, sizeof(count));
  doorbells_.fetch_add(1, std::memory_order_relaxed);
}

const RemoteHandle* RingQueue::FindHandleSlow(uint64_t id) {
  // The count first: a handle removed after it is looked up again next
  // time.
  last_handle_removals_ = handles_->removals();
  last_handle_ = handles_->Find(id);
  return last_handle_.get();
}

void RingQueue::SetEngineCpu(int cpu) {
  queue::SetEngineCpu(segment_.data(), cpu);
}

bool RingQueue::PublishLocked() {
  const bool asleep = completions_.Publish();
  if (asleep) ++client_wakeups_;
  // Asleep (woken just now) or yielding on this CPU, the client runs only
  // when this thread gives way (queue_layout.h).
  if (queue::ClientWaitsHere(segment_.data())) {
    t_yield_hint = asleep ? YieldHint::kToSleeper : YieldHint::kToYielder;
  }
  return asleep;
}

void RingQueue::WakeClient() {
  // Outside the lock: a system call would keep other threads spinning.
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wakeup_.get(), &one, sizeof(one));
}

RingQueueStats RingQueue::stats() const {
  RingQueueStats s;
  s.opened = opened_;
  s.doorbells = doorbells_.load(std::memory_order_relaxed);
  SpinLockHolder lock(&mu_);
  s.in_flight = in_flight_;
  s.submitted = submitted_;
  s.completed = completed_;
  s.failed = failed_;
  s.notified = notified_;
  if (backlog_.has_value()) {
    s.held = backlog_->held();
    s.lost = backlog_->lost();
  }
  s.client_wakeups = client_wakeups_;
  s.stop_reason = stop_reason_;
  return s;
}

RingQueue::YieldHint RingQueue::TakeYieldHint() {
  return std::exchange(t_yield_hint, YieldHint::kNone);
}

queue::CompletionEntry RingQueue::MakeEntry(uint64_t tag,
                                            const absl::Status& status,
                                            uint64_t bytes,
                                            core::TransportKind transport,
                                            absl::Duration daemon_time) const {
  queue::CompletionEntry entry{};
  entry.kind = static_cast<uint8_t>(queue::CompletionKind::kCompletion);
  entry.transport = TransportCode(transport);
  // ok() is inline; code() is a call into Debian's shared abseil.
  entry.code = status.ok() ? 0 : static_cast<int32_t>(status.code());
  entry.tag = tag;
  entry.bytes = status.ok() ? bytes : 0;
  entry.daemon_ns = static_cast<uint64_t>(
      std::max<int64_t>(0, absl::ToInt64Nanoseconds(daemon_time)));
  return entry;
}

void RingQueue::PushCompletionLocked(const queue::CompletionEntry& entry,
                                     absl::string_view message) {
  if (in_flight_ > 0) --in_flight_;
  // The slot was reserved when the submission was taken; the client can
  // still have lied about its head since, which Space() catches when it
  // reads it.
  absl::StatusOr<uint32_t> space = completions_.Space(1);
  if (!space.ok() || *space == 0) return;
  completions_.Push(entry, message);
  ++completed_;
  if (entry.code != 0) ++failed_;
}

void RingQueue::Complete(uint64_t tag, const absl::Status& status,
                         uint64_t bytes, core::TransportKind transport,
                         absl::Duration daemon_time) {
  const queue::CompletionEntry entry =
      MakeEntry(tag, status, bytes, transport, daemon_time);
  if (t_round_queue == this) {
    deferred_.push_back(entry);
    if (!status.ok()) {
      deferred_messages_.emplace_back(deferred_.size() - 1,
                                      std::string(status.message()));
    }
    return;
  }
  if (runtime::TurnBatch::Active()) {
    {
      SpinLockHolder lock(&mu_);
      PushCompletionLocked(entry, status.message());
    }
    runtime::TurnBatch::Defer(shared_from_this());
    return;
  }
  bool wake;
  {
    SpinLockHolder lock(&mu_);
    PushCompletionLocked(entry, status.message());
    wake = PublishLocked();
  }
  if (wake) WakeClient();
}

void RingQueue::FlushTurn() {
  bool wake;
  {
    SpinLockHolder lock(&mu_);
    wake = PublishLocked();
  }
  if (wake) WakeClient();
}

void RingQueue::BeginRound() { t_round_queue = this; }

void RingQueue::EndRound() {
  t_round_queue = nullptr;
  if (deferred_.empty()) return;
  bool wake;
  {
    SpinLockHolder lock(&mu_);
    size_t next_message = 0;
    for (size_t i = 0; i < deferred_.size(); ++i) {
      absl::string_view message;
      if (next_message < deferred_messages_.size() &&
          deferred_messages_[next_message].first == i) {
        message = deferred_messages_[next_message++].second;
      }
      PushCompletionLocked(deferred_[i], message);
    }
    wake = PublishLocked();
  }
  if (wake) WakeClient();
  deferred_.clear();
  deferred_messages_.clear();
}

bool RingQueue::RoomForNotificationLocked() {
  // More than half of the ring stays free beside the slots reserved for
  // the operations in flight: a writer cannot take the ring from the
  // owner's own operations (queue_layout.h).
  const uint32_t keep = in_flight_ + geometry_.cq_entries / 2;
  absl::StatusOr<uint32_t> space = completions_.Space(keep + 1);
  return space.ok() && *space > keep;
}

void RingQueue::PushNotificationLocked(const PendingNotification& n) {
  queue::CompletionEntry entry{};
  if (n.lost > 0) {
    entry.kind =
        static_cast<uint8_t>(queue::CompletionKind::kNotificationsLost);
    entry.bytes = n.lost;
    completions_.Push(entry, "");
    return;
  }
  entry.kind = static_cast<uint8_t>(queue::CompletionKind::kNotification);
  entry.transport = TransportCode(n.transport);
  entry.tag =
      n.writer_uid.has_value() ? uint64_t{*n.writer_uid} : queue::kNoWriterUid;
  entry.region = n.region;
  entry.offset = n.offset;
  entry.bytes = n.length;
  entry.immediate = n.immediate;
  completions_.Push(entry, n.writer != nullptr ? *n.writer : "");
  ++notified_;
}

bool RingQueue::DrainLocked() {
  bool moved = false;
  while (!backlog_->empty() && RoomForNotificationLocked()) {
    PushNotificationLocked(backlog_->front());
    backlog_->PopFront();
    moved = true;
  }
  holding_.store(!backlog_->empty(), std::memory_order_release);
  queue::SetNotificationsHeld(segment_.data(), backlog_->entries());
  return moved;
}

void RingQueue::HoldNotifications(NotificationBacklog initial) {
  bool wake = false;
  {
    SpinLockHolder lock(&mu_);
    backlog_.emplace(std::move(initial));
    if (DrainLocked()) wake = PublishLocked();
  }
  if (wake) WakeClient();
}

bool RingQueue::Notify(const PendingNotification& n) {
  SpinLockHolder lock(&mu_);
  if (!backlog_.has_value()) return false;  // not a notification queue
  if (!stopped() && backlog_->empty() && RoomForNotificationLocked()) {
    PushNotificationLocked(n);
    return PublishLocked();
  }
  backlog_->Add(n);
  holding_.store(true, std::memory_order_release);
  queue::SetNotificationsHeld(segment_.data(), backlog_->entries());
  return false;
}

bool RingQueue::DeliverHeld() {
  if (stopped()) return false;
  bool moved = false;
  bool wake = false;
  {
    SpinLockHolder lock(&mu_);
    if (!backlog_.has_value()) return false;
    moved = DrainLocked();
    if (moved) wake = PublishLocked();
  }
  if (wake) WakeClient();
  return moved;
}

NotificationBacklog RingQueue::TakeBacklog() {
  SpinLockHolder lock(&mu_);
  holding_.store(false, std::memory_order_release);
  queue::SetNotificationsHeld(segment_.data(), 0);
  // What stays behind is empty: Notify is no longer called for a queue
  // the registry took the backlog of.
  return std::move(*backlog_);
}

void RingQueue::Stop(const absl::Status& why) {
  if (stopped_.exchange(true)) return;
  {
    SpinLockHolder lock(&mu_);
    stop_reason_ = why;
  }
  // Closed by its client, or with its session: nothing to warn about.
  if (absl::IsCancelled(why)) {
    spdlog::debug("queue {} of session {} closed: {}", id_,
                  caller_.session_id, std::string(why.message()));
  } else {
    spdlog::warn("queue {} of session {} stopped: {}", id_,
                 caller_.session_id, why.ToString());
  }
  queue::StopQueue(segment_.data(), why);
  // A client asleep on the queue learns it at once.
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wakeup_.get(), &one, sizeof(one));
}

}  // namespace rdmad::ring
