// A completion queue with its own completion channel.
//
// Work requests posted on a QueuePair complete into a CompletionQueue. The
// queue can be polled without blocking (the CQ poller of the transport does
// that when the channel fd it watches becomes readable) or waited on with a
// deadline: a short busy poll first, because a completion is often only
// microseconds away, then ibv_req_notify_cq and a poll() on the channel fd,
// so a waiting thread sleeps instead of burning a core.
//
// Example:
//   RDMAD_ASSIGN_OR_RETURN(std::shared_ptr<CompletionQueue> cq,
//                          CompletionQueue::Create(device, 256));
//   ... post a signaled work request on a QP that uses `cq` ...
//   RDMAD_RETURN_IF_ERROR(cq->WaitOne(absl::Now() + absl::Seconds(5)));
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_COMPLETION_QUEUE_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_COMPLETION_QUEUE_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/handles.h"

namespace rdmad::verbs {

// What growing a CQ of `capacity` entries to hold `min_entries` takes on a
// device whose CQs hold at most `max_cqe` (named `device` in the error):
// nothing (false: it holds that many already), an ibv_resize_cq (true), or
// ResourceExhausted when no CQ of the device holds that many. Pure; the
// check CompletionQueue::Grow makes before it touches the CQ.
absl::StatusOr<bool> CqNeedsResize(int capacity, int min_entries, int max_cqe,
                                   absl::string_view device);

// Owns one ibv_cq and the ibv_comp_channel its events go to; keeps its
// Device alive. QueuePairs hold a shared_ptr to their CompletionQueue, so
// the CQ outlives every QP attached to it.
//
// Thread-safety: thread-compatible. One thread at a time may Poll, Wait,
// Arm or ConsumeEvents (the event bookkeeping is not locked); in the daemon
// that is the CQ's poller thread.
class CompletionQueue {
 public:
  // How long Wait busy-polls before it sleeps on the channel by default.
  static constexpr absl::Duration kDefaultSpin = absl::Microseconds(50);

  // Creates a CQ with room for at least `min_entries` completions on
  // `device` and a completion channel whose fd is non-blocking. Size it to
  // the sum of the send queue depths of the QPs that use it: an overrun CQ
  // is unusable (IBV_EVENT_CQ_ERR).
  static absl::StatusOr<std::shared_ptr<CompletionQueue>> Create(
      std::shared_ptr<Device> device, int min_entries);

  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;
  // Acknowledges pending events (ibv_destroy_cq waits for them otherwise).
  ~CompletionQueue();

  const std::shared_ptr<Device>& device() const { return device_; }

  // The CQ. Not owned by the caller; valid while this object lives.
  ibv_cq* cq() const { return cq_.get(); }

  // Actual number of entries (ibv_create_cq may round up).
  int capacity() const { return cq_->cqe; }

  // Grows the CQ to at least `min_entries` (ibv_resize_cq), for QPs added
  // to those already on it; no-op when it has that many. Called by the
  // thread that polls it. Past the device's max_cqe: ResourceExhausted
  // (CqNeedsResize). That and the errors of ibv_resize_cq (memory) leave
  // the CQ as it was.
  absl::Status Grow(int min_entries);

  // The completion channel fd (non-blocking). It becomes readable after
  // Arm() once a completion arrives; an event loop watches it, then calls
  // ConsumeEvents(), Arm() and Poll() in that order. Not owned by the
  // caller: never close it.
  int event_fd() const { return channel_->fd; }

  // Moves up to out.size() completions into `out` without waiting and
  // returns how many (0 if none). Failed completions are returned like
  // successful ones; check each with CompletionStatus().
  absl::StatusOr<size_t> Poll(absl::Span<ibv_wc> out);

  // Requests one event on the channel for the next completion
  // (ibv_req_notify_cq, any completion, one-shot). Poll once more after
  // arming: a completion that arrived before the arm raises no event.
  absl::Status Arm();

  // Reads every event pending on the channel without blocking and
  // acknowledges them (in batches; ibv_ack_cq_events takes a lock). Returns
  // how many were read. An event may arrive with no completion left to poll.
  absl::StatusOr<int> ConsumeEvents();

  // Waits until at least one completion is available or `deadline` passes.
  // Busy-polls for up to `spin`, then arms the CQ and sleeps in poll() on
  // the channel fd. Returns the number of completions written to `out`
  // (at least 1, whatever their status); DeadlineExceeded if none arrived.
  absl::StatusOr<size_t> Wait(absl::Span<ibv_wc> out, absl::Time deadline,
                              absl::Duration spin = kDefaultSpin);

  // Waits for exactly one completion and returns CompletionStatus() of it:
  // OK, or an error naming ibv_wc_status_str. `wc`, if not null, receives
  // the completion. DeadlineExceeded if none arrived in time.
  absl::Status WaitOne(absl::Time deadline, ibv_wc* wc = nullptr);

 private:
  // Acknowledge in batches of this many events, and all on destruction.
  static constexpr unsigned int kAckBatch = 64;

  CompletionQueue(std::shared_ptr<Device> device, CompChannelHandle channel,
                  CqHandle cq);

  // Parent first, so the CQ is destroyed before its channel and device.
  std::shared_ptr<Device> device_;
  CompChannelHandle channel_;
  CqHandle cq_;
  unsigned int unacked_events_ = 0;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_COMPLETION_QUEUE_H_
