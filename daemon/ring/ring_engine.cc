#include "daemon/ring/ring_engine.h"

#include <sched.h>
#include <sys/epoll.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/spin_gate.h"
#include "common/tick_clock.h"
#include "daemon/ring/ring_decoder.h"
#include "spdlog/spdlog.h"

namespace rdmad::ring {
namespace {

// What the completions of one round share: one reference to the queue,
// taken for the round and dropped by whichever of them goes last (on any
// thread, maybe long after the round). Each operation's callback then
// holds two words (this and its tag), which AnyInvocable keeps inline: no
// allocation and no shared_ptr count per operation.
class RoundRef {
 public:
  // The round's own reference.
  static RoundRef Start(std::shared_ptr<RingQueue> queue) {
    return RoundRef(new Shared{std::move(queue), {1}});
  }
  // A reference for one callback, not counted yet: AddAdopted counts the
  // round's callbacks at once (one atomic add per round), before any of
  // them can run or be dropped.
  RoundRef Adopt() const { return RoundRef(shared_); }
  void AddAdopted(uint32_t n) const {
    shared_->refs.fetch_add(n, std::memory_order_relaxed);
  }

  RoundRef(RoundRef&& other) noexcept
      : shared_(std::exchange(other.shared_, nullptr)) {}
  RoundRef& operator=(RoundRef&&) = delete;
  RoundRef(const RoundRef&) = delete;
  ~RoundRef() {
    if (shared_ != nullptr &&
        shared_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      delete shared_;
    }
  }

  RingQueue* queue() const { return shared_->queue.get(); }

 private:
  struct Shared {
    std::shared_ptr<RingQueue> queue;
    std::atomic<uint32_t> refs;
  };
  explicit RoundRef(Shared* shared) : shared_(shared) {}
  Shared* shared_;
};

// Puts what a transfer came to on `queue`'s ring as `tag`'s completion.
void CompleteWith(RingQueue& queue, uint64_t tag,
                  const absl::StatusOr<core::TransferResult>& result) {
  if (result.ok()) {
    queue.Complete(tag, absl::OkStatus(), result->bytes, result->transport,
                   result->latency);
  } else {
    queue.Complete(tag, result.status(), 0, core::TransportKind::kNone);
  }
}

}  // namespace

RingEngine::RingEngine(runtime::EventLoop* loop,
                       core::TransferEngine* transfers)
    : loop_(loop), transfers_(transfers) {
  unreported_.reserve(kRoundBudget);
  // Not on the first operation: measuring the clock's rate sleeps.
  TickClock::Calibrate();
}

RingEngine::~RingEngine() = default;

void RingEngine::Attach(std::shared_ptr<RingQueue> queue) {
  loop_->Post([this, queue = std::move(queue)]() mutable {
    if (!registered_) {
      loop_->AddPoller(this);
      registered_ = true;
    }
    Attached a;
    RingQueue* raw = queue.get();
    auto watch = loop_->Watch(queue->doorbell_fd(), EPOLLIN,
                              [raw](uint32_t) { raw->ClearDoorbell(); });
    if (!watch.ok()) {
      queue->Stop(absl::InternalError(absl::StrCat(
          "cannot watch the queue's doorbell: ", watch.status().message())));
      return;
    }
    a.doorbell_watch = *watch;
    a.queue = std::move(queue);
    queues_.push_back(std::move(a));
    cpu_ = -1;  // tell them all, the new one included
    NoteCpu();
  });
}

void RingEngine::Detach(uint64_t queue_id) {
  loop_->Post([this, queue_id] {
    for (auto it = queues_.begin(); it != queues_.end(); ++it) {
      if (it->queue->id() == queue_id) {
        loop_->Unwatch(it->doorbell_watch);
        queues_.erase(it);
        return;
      }
    }
  });
}

void RingEngine::Shutdown() {
  absl::Status s = runtime::RunOnLoop(loop_, [this]() -> absl::Status {
    for (Attached& a : queues_) loop_->Unwatch(a.doorbell_watch);
    queues_.clear();
    if (stall_timer_ != 0) loop_->CancelTimer(stall_timer_);
    stall_timer_ = 0;
    if (registered_) loop_->RemovePoller(this);
    registered_ = false;
    return absl::OkStatus();
  });
  if (!s.ok() && !absl::IsFailedPrecondition(s)) {
    spdlog::error("ring engine on {}: {}", loop_->name(), s.ToString());
  }
}

bool RingEngine::Serve(const std::shared_ptr<RingQueue>& polled) {
  queue::SubmissionEntry entries[kRoundBudget];
  const size_t n = polled->Take(absl::MakeSpan(entries));
  if (n == 0) return false;
  RingQueue* const queue = polled.get();
  // The daemon time of each operation runs from here. Deadlines are a
  // timeout away: the turn's clock is close enough for them, and is read
  // only for a round that has operations to pass on (the local copies
  // that most rounds hold need none, and absl::Now() costs more than one).
  const TickClock::Ticks taken = TickClock::Now();
  absl::Time now = absl::InfinitePast();
  queue->BeginRound();
  batch_.clear();
  // `polled` is an element of queues_: the round keeps its own reference
  // for the completions that outlive it, taken at the first operation that
  // needs a callback (a round of local copies needs none).
  std::optional<RoundRef> round;
  uint32_t callbacks = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t tag = entries[i].tag;
    // Entries mostly name the handle the previous one named: the queue
    // keeps it while no handle of the session was closed.
    const RemoteHandle* handle = queue->FindHandle(entries[i].remote_handle);
    DecodedEntry decoded;
    if (absl::Status s = DecodeEntry(entries[i], handle, &decoded); !s.ok()) {
      queue->Complete(tag, s, 0, core::TransportKind::kNone);
      continue;
    }
    // A region of this daemon: copied now, in the round's order, as the
    // batch would have copied it (TransferEngine::CopyNow), and accounted
    // for once the round's completions are out.
    if (handle->target.is_local()) {
      std::optional<absl::StatusOr<core::TransferResult>> copied =
          transfers_->CopyUnreported(queue->caller(),
                                     ToLocalCopy(decoded, *handle), taken,
                                     queue->region_cache());
      if (copied.has_value()) {
        CompleteWith(*queue, tag, *copied);
        unreported_.push_back({decoded.op, *std::move(copied)});
        continue;
      }
      // A name the cluster directory may know: through the batch.
    }
    if (now == absl::InfinitePast()) now = loop_->turn_start();
    core::TransferRequest& request = batch_.emplace_back();
    ToSpec(decoded, *handle, now, queue->default_timeout(), &request.spec);
    if (!round.has_value()) round.emplace(RoundRef::Start(polled));
    request.done = [ref = round->Adopt(),
                    tag](absl::StatusOr<core::TransferResult> result) {
      CompleteWith(*ref.queue(), tag, result);
    };
    ++callbacks;
  }
  // Counted before any callback can run (none runs before SubmitBatch).
  if (callbacks > 0) round->AddAdopted(callbacks);
  if (!batch_.empty()) {
    transfers_->SubmitBatch(queue->caller(), absl::MakeSpan(batch_), now,
                            &queue->region_cache());
    batch_.clear();
  }
  // Publishes what finished inline (local copies, failed checks) at once.
  queue->EndRound();
  for (const Unreported& u : unreported_) transfers_->ReportCopy(u.op, u.result);
  unreported_.clear();
  return true;
}

void RingEngine::NoteCpu() {
  // sched_getcpu reads the kernel's rseq area: nanoseconds, every turn.
  const int cpu = ::sched_getcpu();
  if (cpu == cpu_) return;
  cpu_ = cpu;
  for (const Attached& a : queues_) a.queue->SetEngineCpu(cpu);
}

void RingEngine::ForgetStaleRegions() {
  // One load a turn; the queues only when a free or permission change
  // moved it.
  const uint64_t generation = transfers_->regions_generation();
  if (generation == regions_generation_) return;
  regions_generation_ = generation;
  for (const Attached& a : queues_) {
    transfers_->ForgetStale(a.queue->region_cache());
  }
}

void RingEngine::ForgetAllRegions() {
  for (const Attached& a : queues_) a.queue->region_cache() = {};
}

bool RingEngine::Poll() {
  NoteCpu();
  ForgetStaleRegions();
  bool work = false;
  // By index, and Serve takes its own reference when it has work: a
  // completion run inline never detaches (Detach is a task), but stay safe.
  for (size_t i = 0; i < queues_.size(); ++i) {
    RingQueue& queue = *queues_[i].queue;
    // Notifications held for want of room follow as the client frees it
    // (one load per queue when none are held).
    if (queue.holds_notifications()) work |= queue.DeliverHeld();
    work |= Serve(queues_[i].queue);
  }
  // A client waiting on this CPU for a round here (or for a completion the
  // loop ran since) runs now rather than after this loop's spin; one that
  // keeps doing so gets this CPU to itself (CpuStepAside).
  const RingQueue::YieldHint hint = RingQueue::TakeYieldHint();
  if (hint == RingQueue::YieldHint::kToYielder &&
      step_aside_.Yielded(absl::Now())) {
    cpu_ = -1;  // tell the clients where it went
    NoteCpu();
  } else if (hint != RingQueue::YieldHint::kNone) {
    YieldCpu();  // not a preemption (common/spin_gate.h)
  }
  return work;
}

bool RingEngine::PrepareToSleep() {
  bool work = false;
  bool stalled = false;
  for (const Attached& a : queues_) {
    // Held notifications: delivered if the client made room since the
    // last turn, else looked at again later, as a stalled queue is (its
    // client frees room without a doorbell unless it knows to ring one).
    if (a.queue->holds_notifications()) {
      if (a.queue->DeliverHeld()) {
        work = true;
      } else if (!a.queue->stopped()) {
        stalled = true;
      }
    }
    switch (a.queue->SleepUnlessWork()) {
      case RingQueue::SleepCheck::kSleep:
        break;
      case RingQueue::SleepCheck::kWork:
        work = true;
        break;
      case RingQueue::SleepCheck::kStalled:
        stalled = true;
        break;
    }
  }
  if (work) {
    Woke();
    return true;
  }
  if (stalled) {
    ScheduleStallCheck();
  } else {
    stall_wait_ = absl::ZeroDuration();
  }
  // Asleep, this thread would notice no free: let go of every region now
  // (the first round after waking looks them up again).
  ForgetAllRegions();
  return false;
}

void RingEngine::ScheduleStallCheck() {
  if (stall_timer_ != 0) return;  // the one armed looks at every queue
  stall_wait_ = stall_wait_ == absl::ZeroDuration()
                    ? kFirstStallCheck
                    : std::min(2 * stall_wait_, kMaxStallCheck);
  // The turn the timer wakes polls every queue (Poll), which takes what
  // the client made room for since.
  stall_timer_ = loop_->RunAt(absl::Now() + stall_wait_,
                              [this] { stall_timer_ = 0; });
}

void RingEngine::Woke() {
  step_aside_.Slept();
  for (const Attached& a : queues_) a.queue->Awake();
}

}  // namespace rdmad::ring
