#include "daemon/ring/queue_registry.h"

#include <algorithm>
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
                             core::RegionTable* regions)
    : sessions_table_(sessions), regions_(regions) {
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
          if ((*q)->notifications()) RemoveNotifier(it->second, **q);
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

absl::Status QueueRegistry::Notify(const core::Region& region,
                                   uint64_t offset, uint64_t length,
                                   uint32_t immediate) {
  // Most often one queue: kept inline, no allocation per notification.
  absl::InlinedVector<std::shared_ptr<RingQueue>, 2> targets;
  {
    absl::MutexLock lock(&mu_);
    if (region.owner() == core::RegionOwnerKind::kSession) {
      auto it = sessions_.find(region.creator().session_id);
      if (it != sessions_.end() && it->second.notifications != nullptr) {
        targets.push_back(it->second.notifications);
      }
    } else if (auto it = notifications_by_uid_.find(region.acl().uid);
               it != notifications_by_uid_.end()) {
      targets.assign(it->second.begin(), it->second.end());
    }
  }
  if (targets.empty()) return absl::OkStatus();  // nobody to tell
  bool told = false;
  for (const auto& q : targets) {
    told |= q->Notify(region.id(), offset, length, immediate);
  }
  if (told) return absl::OkStatus();
  not_told_.fetch_add(1, std::memory_order_relaxed);
  return core::OwnerNotToldError(region.Label());
}

void QueueRegistry::EndSession(uint64_t session_id) {
  Session session;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) return;
    session = std::move(it->second);
    sessions_.erase(it);
    for (const auto& q : session.queues) Retire(*q);
    if (session.notifications != nullptr) {
      RemoveNotifier(session, *session.notifications);
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
  session.notifications = queue;
  notifications_by_uid_[queue->caller().uid].push_back(queue);
}

void QueueRegistry::RemoveNotifier(Session& session, const RingQueue& queue) {
  if (session.notifications.get() == &queue) session.notifications.reset();
  auto it = notifications_by_uid_.find(queue.caller().uid);
  if (it == notifications_by_uid_.end()) return;
  std::erase_if(it->second, [&queue](const std::shared_ptr<RingQueue>& q) {
    return q.get() == &queue;
  });
  if (it->second.empty()) notifications_by_uid_.erase(it);
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
  }
  totals.notifications_not_told = not_told_.load(std::memory_order_relaxed);
  return totals;
}

}  // namespace rdmad::ring
