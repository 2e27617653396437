// RingEngine: polls the submission rings of the queues placed on one engine
// loop of the IoRuntime and runs what it finds.
//
// Each round it takes a bounded number of entries from each queue (so one
// busy client cannot starve the others) and copies and validates every
// entry (ring_decoder.h). An entry whose target is a region of this daemon
// is checked and copied at once (TransferEngine::CopyNow: the checks of
// the gRPC path, no callback, no allocation); the others go to the
// TransferEngine as the round's one batch: it checks each against the
// session's rights exactly as for a gRPC request and gives them to the
// peer layer together (one Post per channel: a chain per QP, coalesced TCP
// frames). Completions go back on the queue's ring from whichever thread
// finishes them; those of the round's own thread are published together
// when the round ends.
//
// As a runtime::Poller it keeps its loop spinning while there is work and
// for the loop's spin time after; before the loop sleeps it raises every
// queue's sleeping flag, so that a client rings the doorbell (an eventfd
// the loop watches) for its next submission. Idle, it uses no CPU. It
// delivers the notifications a queue holds as its client frees room on the
// completion ring (looking again after a while, as for a stalled queue,
// while none is freed). It also keeps each queue told which CPU it runs
// on, so that a client on the same CPU sleeps at once instead of spinning
// against it.
//
// Lives on its loop; Attach and Detach may be called from any thread.
#ifndef RDMAD_DAEMON_RING_RING_ENGINE_H_
#define RDMAD_DAEMON_RING_RING_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/core/transfer_engine.h"
#include "daemon/ring/cpu_step_aside.h"
#include "daemon/ring/ring_queue.h"
#include "daemon/runtime/event_loop.h"

namespace rdmad::ring {

class RingEngine final : public runtime::Poller {
 public:
  // Entries taken from one queue per round.
  static constexpr size_t kRoundBudget = 64;
  // How soon a stalled queue is looked at again: first, and at the most.
  static constexpr absl::Duration kFirstStallCheck = absl::Microseconds(100);
  static constexpr absl::Duration kMaxStallCheck = absl::Milliseconds(10);

  // `loop` and `transfers` are not owned and outlive the engine; the
  // engine must be detached from its loop (Shutdown) before it goes.
  RingEngine(runtime::EventLoop* loop, core::TransferEngine* transfers);
  ~RingEngine() override;

  // Starts polling `queue` (and watching its doorbell).
  void Attach(std::shared_ptr<RingQueue> queue);
  // Stops polling the queue with that id.
  void Detach(uint64_t queue_id);
  // The name of the loop it polls on ("rdmad-io0"...), for ListQueues.
  const std::string& loop_name() const { return loop_->name(); }
  // Detaches everything and leaves the loop; waits (bounded) until done.
  void Shutdown();

  // runtime::Poller (loop thread).
  bool Poll() override;
  bool PrepareToSleep() override;
  void Woke() override;

 private:
  struct Attached {
    std::shared_ptr<RingQueue> queue;
    uint64_t doorbell_watch = 0;
  };

  // Takes one round from `queue` and runs it; true if there was any.
  bool Serve(const std::shared_ptr<RingQueue>& polled);
  // Tells every queue's client when this thread moved to another CPU.
  void NoteCpu();
  // Region caches hold their regions (core::CachedRegion): after a free or
  // a permission change every queue's lets go of what went stale, and an
  // engine going to sleep lets go of all, so that no idle queue keeps a
  // freed region's memory.
  void ForgetStaleRegions();
  void ForgetAllRegions();
  // A queue is stalled (RingQueue::SleepCheck::kStalled): wakes the loop
  // after a while to look again, backing off while it stays stalled.
  void ScheduleStallCheck();

  runtime::EventLoop* const loop_;          // Not owned.
  core::TransferEngine* const transfers_;  // Not owned.
  std::vector<Attached> queues_;  // loop thread only
  // One round's requests (loop thread only; kept for its capacity).
  std::vector<core::TransferRequest> batch_;
  // The round's local copies, reported after its completions are
  // published (TransferEngine::CopyUnreported; loop thread only).
  struct Unreported {
    core::OpType op;
    absl::StatusOr<core::TransferResult> result;
  };
  std::vector<Unreported> unreported_;
  bool registered_ = false;       // loop thread only
  // The region table's generation when the queues' region caches were last
  // made to forget what went stale (loop thread only).
  uint64_t regions_generation_ = 0;
  int cpu_ = -1;                  // loop thread only: where queues think we run
  CpuStepAside step_aside_;       // loop thread only
  // The stall check (loop thread only): its timer (0: none) and the wait
  // before the next one, doubled from kFirstStallCheck up to
  // kMaxStallCheck while a queue stays stalled, back to zero once none is.
  uint64_t stall_timer_ = 0;
  absl::Duration stall_wait_ = absl::ZeroDuration();
};

}  // namespace rdmad::ring

#endif  // RDMAD_DAEMON_RING_RING_ENGINE_H_
