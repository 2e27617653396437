// RingQueue: the daemon's side of one client queue (common/queue_layout.h):
// the shared segment it created, the doorbell and wake-up eventfds, and the
// two ring ends the daemon drives.
//
// Submissions are taken only by the queue's engine (one loop thread), and
// only as many as the completion ring is sure to have room for: a taken
// submission reserves its completion slot, so completions never overflow
// and a client that stops consuming completions just stops being served
// (back-pressure). Completions come from any thread (the engine for local
// copies, the loops of the data channels for remote ones) and are published
// under a lock.
//
// A notification queue also carries notifications, on the slots its own
// operations do not need (queue_layout.h): what does not fit waits in the
// queue's NotificationBacklog and follows as the client frees room
// (DeliverHeld, from its engine). A notification never stops a queue.
//
// A queue whose indices the client made impossible is stopped with a
// precise status in its header; nothing else is affected.
#ifndef RDMAD_DAEMON_RING_RING_QUEUE_H_
#define RDMAD_DAEMON_RING_RING_QUEUE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/queue_layout.h"
#include "common/queue_ring.h"
#include "common/spin_lock.h"
#include "common/unique_fd.h"
#include "daemon/core/region.h"
#include "daemon/core/shm_segment.h"
#include "daemon/core/transfer.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/ring/notification_backlog.h"
#include "daemon/ring/remote_handles.h"
#include "daemon/runtime/turn_batch.h"

namespace rdmad::ring {

struct RingQueueOptions {
  uint32_t submission_entries = 256;
  uint32_t completion_entries = 512;
  absl::Duration default_timeout = absl::Seconds(30);
  bool notifications = false;
};

// What an operator sees of a queue (ListQueues, `rdmactl queues`): counts
// since it was opened.
struct RingQueueStats {
  absl::Time opened;
  uint32_t in_flight = 0;  // taken, completion not published yet
  uint64_t submitted = 0;  // entries taken from the submission ring
  uint64_t completed = 0;  // completions published (of taken entries)
  uint64_t failed = 0;     // of those, with a status other than OK
  uint64_t notified = 0;   // notifications delivered on the ring
  // Notifications the daemon holds for the ring now (it had no room to
  // spare), and those it counted lost for this queue (past the uid's
  // backlog bound) since it opened.
  uint64_t held = 0;
  uint64_t lost = 0;
  // Times the daemon wrote the wake-up eventfd for a client that slept
  // waiting for a completion: each costs the client a wake-up, so a
  // count close to `completed` says its spin is shorter than its
  // operations take.
  uint64_t client_wakeups = 0;
  // Times the client's doorbell woke the engine from its sleep.
  uint64_t doorbells = 0;
  absl::Status stop_reason;  // OK while it runs
};

class RingQueue final : public runtime::TurnDeferred,
                        public std::enable_shared_from_this<RingQueue> {
 public:
  // A new queue of `caller`'s session. `handles` (the session's) is shared.
  static absl::StatusOr<std::shared_ptr<RingQueue>> Create(
      uint64_t id, const core::Caller& caller,
      std::shared_ptr<RemoteHandles> handles, const RingQueueOptions& options);

  uint64_t id() const { return id_; }
  const core::Caller& caller() const { return caller_; }
  const std::shared_ptr<RemoteHandles>& handles() const { return handles_; }
  const queue::Geometry& geometry() const { return geometry_; }
  absl::Duration default_timeout() const { return options_.default_timeout; }
  bool notifications() const { return options_.notifications; }
  int segment_fd() const { return segment_.fd(); }
  uint64_t segment_size() const { return geometry_.total_size; }
  int doorbell_fd() const { return doorbell_.get(); }
  int wakeup_fd() const { return wakeup_.get(); }

  // --- The engine's thread only. ---

  // The regions this queue's batches looked up (TransferEngine::SubmitBatch).
  core::RegionCache& region_cache() { return region_cache_; }

  // Copies up to out.size() submissions, no more than the completion ring
  // can take; reserves a completion slot for each. Stops the queue and
  // returns 0 when its sequences or indices are impossible.
  size_t Take(absl::Span<queue::SubmissionEntry> out);
  // What the queue says before its engine sleeps.
  enum class SleepCheck {
    kSleep,  // nothing to take: the doorbell is armed
    kWork,   // entries to take: do not sleep
    // Entries wait, but the completion ring has no room for their
    // completions (the client does not consume them). Spinning would not
    // make room: the engine may sleep, but must look again later, as the
    // client frees room without a doorbell.
    kStalled,
  };
  // Before the engine sleeps: arms the doorbell and says whether work came
  // meanwhile. Stops the queue (and says kSleep) when the client's tail or
  // completion head is impossible.
  SleepCheck SleepUnlessWork();
  void Awake();
  // Drains the doorbell eventfd (it rang: counted in stats()).
  void ClearDoorbell();
  // Tells the client which CPU the engine runs on (queue_layout.h).
  void SetEngineCpu(int cpu);
  // The session's handle `id`, or null: the one found last while no
  // handle was removed since, else looked up again (remote_handles.h).
  const RemoteHandle* FindHandle(uint64_t id) {
    if (last_handle_ != nullptr && last_handle_->id == id &&
        last_handle_removals_ == handles_->removals()) {
      return last_handle_.get();
    }
    return FindHandleSlow(id);
  }
  // Whether this thread published completions for a client that waits on
  // this thread's CPU since it last asked: then it should yield to it
  // soon, holding no lock, instead of spinning on (queue_layout.h). The
  // client either slept (and was just woken) or polls between yields (and
  // would rather have a CPU of its own: CpuStepAside).
  enum class YieldHint { kNone, kToSleeper, kToYielder };
  static YieldHint TakeYieldHint();
  // Around one round of the engine: completions this thread makes in
  // between (local copies and failed checks finish inline) are kept and
  // published together by EndRound, with one lock, one release of the
  // completion tail and one look at the client's waiting flag for the
  // round instead of one per operation. Completions from other threads are
  // published at once as always.
  void BeginRound();
  void EndRound();

  // --- Any thread. ---

  // Publishes the completion of a taken submission (using its reserved
  // slot) and wakes the client if it waits. Inside an event-loop turn
  // (runtime::TurnBatch) the entry is written now and published, with one
  // wake-up for all of the turn's completions, when the turn ends.
  void Complete(uint64_t tag, const absl::Status& status, uint64_t bytes,
                core::TransportKind transport,
                absl::Duration daemon_time = absl::ZeroDuration());
  // Notification queues only (options.notifications).
  // Starts the queue's backlog with what was held for its owner before it
  // opened (its uid's budget); delivers what fits.
  void HoldNotifications(NotificationBacklog initial);
  // Puts `n` on the ring when nothing is held before it and the ring has
  // room to spare (more than half of it free beside the slots reserved for
  // operations in flight), else holds it in the backlog (or counts it
  // lost there, past the budget). Also while stopped: it is held for the
  // owner's next queue (TakeBacklog). True when the client waits for it:
  // the caller then calls WakeClient once its own locks are released.
  [[nodiscard]] bool Notify(const PendingNotification& n);
  // Wakes the client asleep on the queue (after Notify said so).
  void WakeClient();
  // runtime::TurnDeferred: publishes the completions written during the
  // turn and wakes the client if it waits.
  void FlushTurn() override;
  // Moves what the backlog holds onto the ring, as far as room allows;
  // true if it moved any. The engine calls it while holds_notifications().
  bool DeliverHeld();
  bool holds_notifications() const {
    return holding_.load(std::memory_order_acquire);
  }
  // The backlog, taken out as the queue closes (the registry hands it to
  // the owner's next queue).
  NotificationBacklog TakeBacklog();
  // Stops taking submissions; the status shows in the segment's header.
  void Stop(const absl::Status& why);
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }
  // Its counts, and why it stopped (ListQueues).
  RingQueueStats stats() const;
  // Submissions taken and not completed.
  uint32_t in_flight() const {
    SpinLockHolder lock(&mu_);
    return in_flight_;
  }

 private:
  RingQueue(uint64_t id, const core::Caller& caller,
            std::shared_ptr<RemoteHandles> handles, RingQueueOptions options,
            queue::Geometry geometry, core::ShmSegment segment,
            UniqueFd doorbell, UniqueFd wakeup);
  const RemoteHandle* FindHandleSlow(uint64_t id);
  queue::CompletionEntry MakeEntry(uint64_t tag, const absl::Status& status,
                                   uint64_t bytes,
                                   core::TransportKind transport,
                                   absl::Duration daemon_time) const;
  // Pushes the completion of a taken submission into its reserved slot.
  void PushCompletionLocked(const queue::CompletionEntry& entry,
                            absl::string_view message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes what was pushed; true if the client waits, and WakeClient
  // must follow once the lock is released.
  bool PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a notification may take a slot now (see Notify).
  bool RoomForNotificationLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pushes one notification or loss marker (not published).
  void PushNotificationLocked(const PendingNotification& n)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves what fits from the backlog onto the ring and says in the header
  // how many stay; true if it moved any (then it must be published).
  bool DrainLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t id_;
  const core::Caller caller_;
  const std::shared_ptr<RemoteHandles> handles_;
  const RingQueueOptions options_;
  const queue::Geometry geometry_;  // the daemon's own record
  core::ShmSegment segment_;
  const UniqueFd doorbell_;  // eventfd the client writes
  const UniqueFd wakeup_;    // eventfd the daemon writes
  const absl::Time opened_ = absl::Now();
  std::atomic<bool> stopped_{false};
  // Written by the engine's thread, read by any (stats()).
  std::atomic<uint64_t> doorbells_{0};

  queue::SubmissionConsumer submissions_;  // engine thread only
  core::RegionCache region_cache_;         // engine thread only
  // FindHandle's last answer (engine thread only).
  std::shared_ptr<const RemoteHandle> last_handle_;
  uint64_t last_handle_removals_ = 0;
  // The completions of a round (engine thread only), and the messages of
  // those that failed, by their index in deferred_ (in order): most rounds
  // fail nothing and build no string.
  std::vector<queue::CompletionEntry> deferred_;
  std::vector<std::pair<size_t, std::string>> deferred_messages_;

  // Held for nanoseconds: an engine's round takes it twice, another
  // thread's completion once (spin_lock.h).
  mutable SpinLock mu_;
  queue::CompletionProducer completions_ ABSL_GUARDED_BY(mu_);
  uint32_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // stats(): counted where the lock is held anyway.
  uint64_t submitted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t notified_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t client_wakeups_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status stop_reason_ ABSL_GUARDED_BY(mu_);
  // Notifications waiting for room (notification queues only).
  std::optional<NotificationBacklog> backlog_ ABSL_GUARDED_BY(mu_);
  // Whether backlog_ holds anything: the engine's look without the lock.
  std::atomic<bool> holding_{false};
};

}  // namespace rdmad::ring

#endif  // RDMAD_DAEMON_RING_RING_QUEUE_H_
