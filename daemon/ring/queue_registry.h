// QueueRegistry: every client queue and remote handle of the daemon, by
// session. Opens queues (placing each on an engine loop, round-robin),
// hands their descriptors to the session socket, closes them when asked or
// when the session ends, and delivers notifications to the queue a session
// chose for them.
//
// Notifications are never refused and never stop a queue. Each goes to
// its receivers (see Notify) at once or into their backlogs
// (notification_backlog.h), in the order they arrived; an owner with no
// notification queue open has its notifications held for it (by uid for a
// daemon-owned region, by session for a session buffer) until one opens,
// which takes them. Every backlog of one uid shares one budget of
// `notification_backlog` notifications; past it they are counted lost, and
// the count reaches the receiver in their place. A queue that closes hands
// back what it held: to its session's next notification queue, and to its
// uid's, unless another queue of the uid is there (and got its own copy).
//
// Thread-safe.
#ifndef RDMAD_DAEMON_RING_QUEUE_REGISTRY_H_
#define RDMAD_DAEMON_RING_QUEUE_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/notification_sink.h"
#include "daemon/core/region_table.h"
#include "daemon/core/session_table.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/ring/notification_backlog.h"
#include "daemon/ring/queue_control.h"
#include "daemon/ring/remote_handles.h"
#include "daemon/ring/ring_engine.h"
#include "daemon/ring/ring_queue.h"
#include "daemon/runtime/io_runtime.h"

namespace rdmad::ring {

// The daemon's queues as a whole, for its metrics. The counts include
// queues closed since the daemon started (as they were when closed), so
// they only grow.
struct QueueTotals {
  uint64_t running = 0;  // open queues served
  uint64_t stopped = 0;  // open queues stopped (RingQueueStats::stop_reason)
  uint64_t client_wakeups = 0;
  uint64_t doorbells = 0;
  uint64_t notifications_delivered = 0;
  // Notifications held now, for queues without room and owners without a
  // queue; and those counted lost past a uid's bound (or whose session
  // ended before it opened a notification queue), since the start.
  uint64_t notifications_held = 0;
  uint64_t notifications_lost = 0;
};

// Which descriptor of a queue the session socket hands out.
enum class QueueFd : uint32_t { kSegment = 0, kDoorbell = 1, kWakeup = 2 };

class QueueRegistry final : public core::NotificationSink,
                            public QueueControl {
 public:
  static constexpr size_t kMaxQueuesPerSession = 64;
  // Notifications the backlogs of one uid hold at most (config
  // notification_backlog's default).
  static constexpr uint64_t kDefaultNotificationBacklog = 16384;

  // `runtime`, `transfers`, `sessions` and `regions` are not owned and
  // outlive the registry. A queue or handle is made only for a session
  // `sessions` has open: a call that passed its session check just before
  // the session ended must not leave behind a queue nothing will ever
  // close. Each queue's segment is charged to its uid in `regions`
  // (RegionTable::ChargeMemory) while the queue is open. The backlogs of
  // one uid hold `notification_backlog` notifications at most.
  QueueRegistry(runtime::IoRuntime* runtime, core::TransferEngine* transfers,
                const core::SessionTable* sessions, core::RegionTable* regions,
                uint64_t notification_backlog = kDefaultNotificationBacklog);
  ~QueueRegistry();  // Shutdown()

  // A new queue for `caller`'s session. RESOURCE_EXHAUSTED past
  // kMaxQueuesPerSession; FAILED_PRECONDITION for a second notification
  // queue; UNAUTHENTICATED once the session has ended; RESOURCE_EXHAUSTED
  // when its segment would pass a memory cap of `regions`. The limits are
  // checked in the same critical section that adds the queue, so calls
  // racing each other cannot pass them together.
  absl::StatusOr<std::shared_ptr<RingQueue>> Open(const core::Caller& caller,
                                                  const RingQueueOptions& options);

  // QueueControl.
  absl::StatusOr<OpenedQueue> OpenQueue(
      const core::Caller& caller, const RingQueueOptions& options) override;
  absl::Status Close(uint64_t session_id, uint64_t queue_id) override;
  absl::StatusOr<std::shared_ptr<RemoteHandles>> HandlesOf(
      uint64_t session_id) override;
  std::vector<QueueSnapshot> List() const override;

  // A descriptor of a queue, to send to its client: `fd` stays open while
  // `queue` is held, even if the queue is closed meanwhile.
  struct QueueDescriptor {
    std::shared_ptr<const RingQueue> queue;
    int fd = -1;        // not owned
    uint64_t size = 0;  // the segment's size (kSegment), else 0
  };
  // The descriptor `which` of a queue of `session_id`.
  absl::StatusOr<QueueDescriptor> Descriptor(uint64_t session_id,
                                             uint64_t queue_id,
                                             QueueFd which) const;

  // This daemon's Peer address: the writer of local copies' notifications.
  void SetSelfAddress(std::string address);

  // core::NotificationSink: to the notification queue of the session that
  // owns a session buffer; for a daemon-owned region, to every
  // notification queue of its owner's uid. Held for the owner when it has
  // none (see above); counted lost for a session that has ended.
  void Notify(const core::Region& region, uint64_t offset, uint64_t length,
              uint32_t immediate,
              const core::NotificationWriter& writer) override;

  // Closes every queue and handle of the session.
  void EndSession(uint64_t session_id);

  // Stops every queue (clients see UNAVAILABLE in the header) and detaches
  // the engines from their loops. Idempotent.
  void Shutdown();

  size_t queue_count() const;
  QueueTotals Totals() const;

 private:
  struct Session {
    std::vector<std::shared_ptr<RingQueue>> queues;
    std::shared_ptr<RemoteHandles> handles;
    // The memory of each open queue's segment, by queue id.
    absl::flat_hash_map<uint64_t, core::MemoryCharge> charges;
    // Its notification queue (one of `queues`), if it opened one.
    std::shared_ptr<RingQueue> notifications;
  };
  RingEngine* EngineOf(uint64_t queue_id) const;
  // Keeps notifications_by_uid_ and Session::notifications in step with
  // the queues that take notifications, as they open and close.
  // The new queue takes what was held for its session and, if it is its
  // uid's first, for its uid.
  void AddNotifier(Session& session, const std::shared_ptr<RingQueue>& queue)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the queue held goes back (see above); `session_continues` is false
  // when its session ended, whose own notifications then are lost.
  void RemoveNotifier(Session& session, RingQueue& queue,
                      bool session_continues)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The uid's budget (made at first use).
  std::shared_ptr<NotificationBudget> BudgetOf(uint32_t uid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The backlog held for `key` in `held` (made at first use).
  template <typename Key>
  NotificationBacklog& HeldFor(
      absl::flat_hash_map<Key, NotificationBacklog>& held, Key key,
      uint32_t uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds what a queue leaving the registry counted to retired_.
  void Retire(const RingQueue& queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // UNAUTHENTICATED unless `session_id` is open (checked under mu_, which
  // EndSession takes after the session closed: see the constructor).
  absl::Status RequireOpen(uint64_t session_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The limits a new queue must keep in `session`.
  static absl::Status CheckLimits(const Session& session,
                                  const RingQueueOptions& options);

  const core::SessionTable* const sessions_table_;  // Not owned.
  core::RegionTable* const regions_;                 // Not owned.

  std::vector<std::unique_ptr<RingEngine>> engines_;

  mutable absl::Mutex mu_;
  uint64_t next_queue_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Session> sessions_ ABSL_GUARDED_BY(mu_);
  // The notification queues of every session, by the uid that opened them:
  // a notification for a named region goes to those of its owner's uid,
  // found without a walk over every session (Notify runs per WRITE with an
  // immediate).
  absl::flat_hash_map<uint32_t, std::vector<std::shared_ptr<RingQueue>>>
      notifications_by_uid_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // The counts of queues closed so far (running and stopped stay 0).
  QueueTotals retired_ ABSL_GUARDED_BY(mu_);

  // Notifications: what a uid's backlogs may hold together.
  const uint64_t notification_backlog_;
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;  // order of arrival
  std::shared_ptr<const std::string> self_address_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, std::shared_ptr<NotificationBudget>> budgets_
      ABSL_GUARDED_BY(mu_);
  // Held for owners without a notification queue: daemon-owned regions'
  // by uid, session buffers' by session.
  absl::flat_hash_map<uint32_t, NotificationBacklog> held_by_uid_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, NotificationBacklog> held_by_session_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::ring

#endif  // RDMAD_DAEMON_RING_QUEUE_REGISTRY_H_
