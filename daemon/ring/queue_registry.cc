#include "daemon/ring/queue_registry.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "common/queue_layout.h"
#include "common/size.h"
#include "spdlog/spdlog.h"

namespace rdmad::ring {

QueueRegistry::QueueRegistry(runtime::IoRuntime* runtime,
                             core::TransferEngine* transfers,
                             const core::SessionTable* sessions,
                             core::RegionTable* regions,
                             uint64_t notification_backlog)
    : sessions_table_(sessions),
      regions_(regions),
      notification_backlog_(notification_backlog),
      self_address_(std::make_shared<const std::string>()) {
  for (size_t i = 0; i < runtime->engines(); ++i) {
    engines_.push_back(
        std::make_unique<RingEngine>(runtime->loop(i), transfers));
  }
}

QueueRegistry::~QueueRegistry() { Shutdown(); }

RingEngine* QueueRegistry::EngineOf(uint64_t queue_id) const {
  return engines_[queue_id % engines_.size()].get();
}

absl::Status QueueRegistry::RequireOpen(uint64_t session_id) const {
  if (shut_down_) return absl::UnavailableError("rdmad is shutting down");
  // The session server closes a session in the table before it ends the
  // session here (EndSession, under mu_). So either the table says closed
  // now, or EndSession has yet to run and will close what is added.
  if (!sessions_table_->Contains(session_id)) {
    return absl::UnauthenticatedError(absl::StrCat(
        "session ", session_id,
        " has ended: open a new session (the client library does so by "
        "itself on its next call)"));
  }
  return absl::OkStatus();
}

absl::Status QueueRegistry::CheckLimits(const Session& session,
                                        const RingQueueOptions& options) {
  if (session.queues.size() >= kMaxQueuesPerSession) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this session already has ", session.queues.size(),
        " queues open: close one first (one queue per thread is plenty)"));
  }
  if (options.notifications) {
    for (const auto& q : session.queues) {
      if (q->notifications()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "queue ", q->id(), " of this session already takes "
            "notifications: one queue per session may"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<OpenedQueue> QueueRegistry::OpenQueue(
    const core::Caller& caller, const RingQueueOptions& options) {
  auto queue = Open(caller, options);
  if (!queue.ok()) return queue.status();
  return OpenedQueue{.id = (*queue)->id(),
                     .geometry = (*queue)->geometry(),
                     .segment_size = (*queue)->segment_size()};
}

absl::StatusOr<std::shared_ptr<RingQueue>> QueueRegistry::Open(
    const core::Caller& caller, const RingQueueOptions& options) {
  uint64_t id;
  std::shared_ptr<RemoteHandles> handles;
  {
    // Checked here too, so that a refused call makes no segment.
    absl::MutexLock lock(&mu_);
    if (absl::Status s = RequireOpen(caller.session_id); !s.ok()) return s;
    Session& session = sessions_[caller.session_id];
    if (absl::Status s = CheckLimits(session, options); !s.ok()) return s;
    if (session.handles == nullptr) {
      session.handles = std::make_shared<RemoteHandles>();
    }
    handles = session.handles;
    id = next_queue_id_++;
  }
  // Outside the lock: charging takes the region table's, and Create makes
  // and clears the segment.
  const uint64_t bytes =
      queue::GeometryFor(options.submission_entries, options.completion_entries)
          .total_size;
  absl::StatusOr<core::MemoryCharge> charge = regions_->ChargeMemory(
      caller, bytes, absl::StrCat("a queue of ", HumanSize(bytes)));
  if (!charge.ok()) return charge.status();
  auto queue = RingQueue::Create(id, caller, std::move(handles), options);
  if (!queue.ok()) return queue.status();
  {
    // Again, now that adding the queue is part of the same critical
    // section: the session may have ended, or another Open added a queue,
    // since the look above. A refused queue is destroyed unused.
    absl::MutexLock lock(&mu_);
    if (absl::Status s = RequireOpen(caller.session_id); !s.ok()) return s;
    Session& session = sessions_[caller.session_id];
    if (absl::Status s = CheckLimits(session, options); !s.ok()) return s;
    session.queues.push_back(*queue);
    session.charges.emplace(id, *std::move(charge));
    if (options.notifications) AddNotifier(session, *queue);
  }
  EngineOf(id)->Attach(*queue);
  return queue;
}

absl::Status QueueRegistry::Close(uint64_t session_id, uint64_t queue_id) {
  std::shared_ptr<RingQueue> closed;
  core::MemoryCharge charge;  // given back after the lock
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session_id);
    if (it != sessions_.end()) {
      auto& queues = it->second.queues;
      for (auto q = queues.begin(); q != queues.end(); ++q) {
        if ((*q)->id() == queue_id) {
          Retire(**q);
          if ((*q)->notifications()) {
            RemoveNotifier(it->second, **q, /*session_continues=*/true);
          }
          closed = std::move(*q);
          queues.erase(q);
          break;
        }
      }
      auto charged = it->second.charges.find(queue_id);
      if (charged != it->second.charges.end()) {
        charge = std::move(charged->second);
        it->second.charges.erase(charged);
      }
    }
  }
  if (closed == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("this session has no queue ", queue_id));
  }
  closed->Stop(absl::CancelledError("the queue was closed"));
  EngineOf(queue_id)->Detach(queue_id);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<RemoteHandles>> QueueRegistry::HandlesOf(
    uint64_t session_id) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = RequireOpen(session_id); !s.ok()) return s;
  Session& session = sessions_[session_id];
  if (session.handles == nullptr) {
    session.handles = std::make_shared<RemoteHandles>();
  }
  return session.handles;
}

absl::StatusOr<QueueRegistry::QueueDescriptor> QueueRegistry::Descriptor(
    uint64_t session_id, uint64_t queue_id, QueueFd which) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session_id);
  if (it != sessions_.end()) {
    for (const auto& q : it->second.queues) {
      if (q->id() != queue_id) continue;
      switch (which) {
        case QueueFd::kSegment:
          return QueueDescriptor{q, q->segment_fd(), q->segment_size()};
        case QueueFd::kDoorbell:
          return QueueDescriptor{q, q->doorbell_fd(), 0};
        case QueueFd::kWakeup:
          return QueueDescriptor{q, q->wakeup_fd(), 0};
      }
      return absl::InvalidArgumentError("unknown queue descriptor");
    }
  }
  return absl::NotFoundError(
      absl::StrCat("this session has no queue ", queue_id));
}

void QueueRegistry::SetSelfAddress(std::string address) {
  absl::MutexLock lock(&mu_);
  self_address_ = std::make_shared<const std::string>(std::move(address));
}

std::shared_ptr<NotificationBudget> QueueRegistry::BudgetOf(uint32_t uid) {
  std::shared_ptr<NotificationBudget>& budget = budgets_[uid];
  if (budget == nullptr) {
    budget = std::make_shared<NotificationBudget>(uid, notification_backlog_);
  }
  return budget;
}

template <typename Key>
NotificationBacklog& QueueRegistry::HeldFor(
    absl::flat_hash_map<Key, NotificationBacklog>& held, Key key,
    uint32_t uid) {
  auto it = held.find(key);
  if (it == held.end()) it = held.try_emplace(key, BudgetOf(uid)).first;
  return it->second;
}

void QueueRegistry::Notify(const core::Region& region, uint64_t offset,
                           uint64_t length, uint32_t immediate,
                           const core::NotificationWriter& writer) {
  PendingNotification n;
  n.region = region.id();
  n.offset = offset;
  n.length = length;
  n.immediate = immediate;
  n.transport = writer.transport;
  n.writer_uid = writer.uid;
  const uint32_t uid = region.acl().uid;
  // Clients asleep on a queue that got the notification: woken after the
  // lock (a system call each). Most often one.
  absl::InlinedVector<std::shared_ptr<RingQueue>, 2> wake;
  {
    // Delivered under the lock: the receivers and backlogs change only
    // under it, so a notification is never handed to a queue that is
    // closing (its backlog taken), and each queue gets them in the order
    // of their sequences.
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      BudgetOf(uid)->CountLost();  // the queues are gone
      return;
    }
    n.sequence = next_sequence_++;
    n.writer = writer.address != nullptr ? writer.address : self_address_;
    if (region.owner() == core::RegionOwnerKind::kSession) {
      n.owner = NotifiedOwner::kSession;
      const uint64_t session_id = region.creator().session_id;
      if (auto it = sessions_.find(session_id);
          it != sessions_.end() && it->second.notifications != nullptr) {
        if (it->second.notifications->Notify(n)) {
          wake.push_back(it->second.notifications);
        }
      } else if (sessions_table_->Contains(session_id)) {
        HeldFor(held_by_session_, session_id, uid).Add(std::move(n));
      } else {
        // The buffer outlived its session by a transfer: nobody to tell.
        BudgetOf(uid)->CountLost();
      }
    } else if (auto it = notifications_by_uid_.find(uid);
               it != notifications_by_uid_.end()) {
      n.owner = NotifiedOwner::kUid;
      for (const auto& q : it->second) {
        if (q->Notify(n)) wake.push_back(q);
      }
    } else {
      n.owner = NotifiedOwner::kUid;
      HeldFor(held_by_uid_, uid, uid).Add(std::move(n));
    }
  }
  for (const auto& q : wake) q->WakeClient();
}

void QueueRegistry::EndSession(uint64_t session_id) {
  Session session;
  {
    absl::MutexLock lock(&mu_);
    // Held for a session that never opened a notification queue: its
    // buffers go with it, nobody is left to tell.
    if (auto held = held_by_session_.find(session_id);
        held != held_by_session_.end()) {
      held->second.Discard();
      held_by_session_.erase(held);
    }
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) return;
    session = std::move(it->second);
    sessions_.erase(it);
    for (const auto& q : session.queues) Retire(*q);
    if (session.notifications != nullptr) {
      RemoveNotifier(session, *session.notifications,
                     /*session_continues=*/false);
    }
  }
  for (const auto& q : session.queues) {
    q->Stop(absl::CancelledError("the session ended"));
    EngineOf(q->id())->Detach(q->id());
  }
}

void QueueRegistry::Shutdown() {
  absl::flat_hash_map<uint64_t, Session> sessions;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    sessions.swap(sessions_);
    notifications_by_uid_.clear();
    held_by_uid_.clear();
    held_by_session_.clear();
    for (auto& [id, session] : sessions) {
      for (const auto& q : session.queues) Retire(*q);
    }
  }
  for (auto& [id, session] : sessions) {
    for (const auto& q : session.queues) {
      q->Stop(absl::UnavailableError(
          "rdmad is shutting down: once it is back, open a new queue (and "
          "remote handles); a restarted rdmad serves no queue of before"));
    }
  }
  for (auto& engine : engines_) engine->Shutdown();
}

size_t QueueRegistry::queue_count() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [id, session] : sessions_) n += session.queues.size();
  return n;
}


void QueueRegistry::AddNotifier(Session& session,
                                const std::shared_ptr<RingQueue>& queue) {
  const uint32_t uid = queue->caller().uid;
  session.notifications = queue;
  std::vector<std::shared_ptr<RingQueue>>& of_uid = notifications_by_uid_[uid];
  NotificationBacklog initial(BudgetOf(uid));
  if (auto it = held_by_session_.find(queue->caller().session_id);
      it != held_by_session_.end()) {
    initial.MergeFrom(it->second);
    held_by_session_.erase(it);
  }
  // The uid's first notification queue: what its regions' writers sent
  // while it had none. (With others open, nothing is held for the uid.)
  if (auto it = held_by_uid_.find(uid);
      of_uid.empty() && it != held_by_uid_.end()) {
    initial.MergeFrom(it->second);
    held_by_uid_.erase(it);
  }
  of_uid.push_back(queue);
  queue->HoldNotifications(std::move(initial));
}

void QueueRegistry::RemoveNotifier(Session& session, RingQueue& queue,
                                   bool session_continues) {
  const uint32_t uid = queue.caller().uid;
  if (session.notifications.get() == &queue) session.notifications.reset();
  bool others = false;
  if (auto it = notifications_by_uid_.find(uid);
      it != notifications_by_uid_.end()) {
    std::erase_if(it->second, [&queue](const std::shared_ptr<RingQueue>& q) {
      return q.get() == &queue;
    });
    others = !it->second.empty();
    if (!others) notifications_by_uid_.erase(it);
  }
  // What it held and its client never saw goes back to the owner.
  NotificationBacklog left = queue.TakeBacklog();
  NotificationBacklog own(BudgetOf(uid));
  left.MoveOwned(NotifiedOwner::kSession, own);
  if (!session_continues) {
    own.Discard();
  } else if (!own.empty()) {
    HeldFor(held_by_session_, queue.caller().session_id, uid).MergeFrom(own);
  }
  // The uid's other queues got their own copies.
  if (!others && !left.empty()) HeldFor(held_by_uid_, uid, uid).MergeFrom(left);
}

void QueueRegistry::Retire(const RingQueue& queue) {
  const RingQueueStats s = queue.stats();
  retired_.client_wakeups += s.client_wakeups;
  retired_.doorbells += s.doorbells;
  retired_.notifications_delivered += s.notified;
}

std::vector<QueueSnapshot> QueueRegistry::List() const {
  std::vector<QueueSnapshot> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [session_id, session] : sessions_) {
      for (const auto& q : session.queues) {
        QueueSnapshot& snapshot = out.emplace_back();
        snapshot.id = q->id();
        snapshot.caller = q->caller();
        snapshot.caller.groups.clear();  // not shown
        snapshot.geometry = q->geometry();
        snapshot.notifications = q->notifications();
        snapshot.engine = EngineOf(q->id())->loop_name();
        snapshot.stats = q->stats();
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const QueueSnapshot& a, const QueueSnapshot& b) {
              return a.id < b.id;
            });
  return out;
}

QueueTotals QueueRegistry::Totals() const {
  QueueTotals totals;
  {
    absl::MutexLock lock(&mu_);
    totals = retired_;
    for (const auto& [session_id, session] : sessions_) {
      for (const auto& q : session.queues) {
        const RingQueueStats s = q->stats();
        ++(q->stopped() ? totals.stopped : totals.running);
        totals.client_wakeups += s.client_wakeups;
        totals.doorbells += s.doorbells;
        totals.notifications_delivered += s.notified;
      }
    }
    for (const auto& [uid, budget] : budgets_) {
      totals.notifications_held += budget->held();
      totals.notifications_lost += budget->lost();
    }
  }
  return totals;
}

}  // namespace rdmad::ring
