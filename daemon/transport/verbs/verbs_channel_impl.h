// Internals of VerbsChannel (verbs_channel.h), shared by its three source
// files: verbs_channel.cc (operations: checking, chunking, posting chains,
// closing), verbs_channel_completions.cc (the CQ: polling, completions,
// errors, deadlines) and verbs_channel_notices.cc (WRITEs with an
// immediate: notices, their acks, credits). Not a public header.
//
// Threads: everything runs on the channel's event loop except Post,
// Describe, NeedsReconnect, ForceError and Close, which hand work to it.
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_CHANNEL_IMPL_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_CHANNEL_IMPL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/runtime/earliest_deadline.h"
#include "daemon/runtime/event_loop.h"
#include "daemon/transport/op_inbox.h"
#include "daemon/transport/verbs/notice_buffers.h"
#include "daemon/transport/verbs/verbs_channel.h"
#include "daemon/transport/verbs/verbs_notice.h"
#include "daemon/transport/verbs/work_request_id.h"

namespace rdmad::verbs {

class VerbsChannel::Impl : public runtime::Poller,
                           public transport::OpInbox::Channel,
                           public std::enable_shared_from_this<Impl> {
 public:
  Impl(VerbsChannelOptions options, std::shared_ptr<CompletionQueue> cq);
  ~Impl() override;

  // Before the channel is shared: takes the QPs, arms the CQ and joins the
  // loop.
  absl::Status Start(std::vector<std::unique_ptr<QueuePair>> qps,
                     std::vector<uint32_t> remote_qpns);

  // Any thread.
  void Post(absl::Span<transport::RemoteOp> ops);
  transport::ChannelInfo Describe() const;
  bool NeedsReconnect() const { return broken_.load(); }
  const std::string& remote_device() const { return options_.remote_device; }
  void ForceError(size_t index);
  void Close();

  // runtime::Poller (loop thread).
  bool Poll() override;
  bool PrepareToSleep() override;

 private:
  // One posted operation and what is left of it.
  struct OpState {
    transport::RemoteOp op;
    uint64_t chunks_left = 0;  // pending or posted, not yet completed
    absl::Status status;       // first failure; OK while all went well
    bool expired = false;      // deadline handled
    // WRITE with an immediate: its notice went out and the peer's ack has
    // not come back. The op finishes only when this is false (or it
    // failed) and every WR completed.
    bool awaiting_ack = false;
    absl::Time posted_at;
    // The local region's lkey on this channel's device, found once when
    // the operation is accepted: every WR of it uses this one.
    uint32_t lkey = 0;
    std::list<std::shared_ptr<OpState>>::iterator position;  // in ops_
  };

  // One work request's worth of an operation: a piece of its data, or
  // (notice) the SEND that announces a WRITE with an immediate.
  struct Chunk {
    std::shared_ptr<OpState> op;
    uint64_t offset = 0;  // inside the operation
    uint32_t length = 0;
    bool notice = false;
  };

  // A notice sent on a QP whose ack has not come back.
  struct Awaiting {
    uint64_t tag = 0;
    std::weak_ptr<OpState> op;  // gone or finished: only the credit matters
  };

  // A WR on a QP's send queue, in posting order.
  struct Posted {
    uint64_t seq = 0;  // WorkRequestId::sequence
    Chunk chunk;
  };

  struct QpState {
    std::unique_ptr<QueuePair> qp;
    uint32_t remote_qpn = 0;
    uint32_t slots = 0;  // granted max_send_wr
    std::deque<Posted> inflight;
    uint64_t next_seq = 1;
    uint32_t unsignaled_run = 0;  // WRs since the last signaled one
    bool error = false;
    uint64_t grace_timer = 0;  // retires what a failed QP still holds
    uint64_t posted = 0, completed = 0, errors = 0;
    uint64_t post_calls = 0;  // ibv_post_send calls: posted / post_calls is
                              // the mean chain length
    // WRITEs with an immediate: their WRs and notice go on this one QP, in
    // this order, so RC places the data before the notice arrives.
    std::deque<Chunk> pinned;
    uint32_t credits = kNoticeCredits;  // notices sendable before an ack
    std::deque<Awaiting> awaiting;      // in sending order (acks come so)
    uint64_t next_tag = 1;
    uint64_t notices_sent = 0;           // picks the next SEND slot
    uint32_t notice_sends_inflight = 0;  // notice SENDs posted, not retired
  };

  // A chain carries at least this many bytes (or every pending chunk)
  // before the pending queue is shared among the QPs.
  static constexpr uint64_t kMinShareBytes = 64 << 10;

  // --- verbs_channel.cc ---
  // Fails them when torn down.
  void StartOps(absl::Span<transport::RemoteOp> ops) override;
  // Checks `op` and returns its local region's lkey on this channel's
  // device (FailedPrecondition if the region has none there).
  absl::StatusOr<uint32_t> CheckedLkey(const transport::RemoteOp& op) const;
  // A fresh state for an accepted operation, at the end of ops_: a spare
  // one (and its list node) when one is free, else a new one.
  const std::shared_ptr<OpState>& NewOpState();
  // Posts pending chunks while QPs have free send-queue slots.
  void Pump();
  // Posts the first `n` chunks of `from` (pending_ or a QP's pinned) on
  // QP `qp_index` as one chain.
  void PostChain(size_t qp_index, std::deque<Chunk>& from, size_t n);
  void Teardown();
  // Asks for more QPs when WRs keep waiting on full send queues (growth_).
  void MaybeGrow();
  // A grow ended: takes its QPs into the pool (loop thread).
  void AddQps(absl::StatusOr<GrownQps> grown);
  // Appends a connected QP to the pool (Start, AddQps).
  void TakeQp(std::unique_ptr<QueuePair> qp, uint32_t remote_qpn);
  absl::Status ClosedError() const override;
  absl::Status BrokenError() const;

  // --- verbs_channel_completions.cc ---
  // Polls the CQ until it is empty; true if it found any completion.
  bool Drain();
  void OnCqEvent();
  // Handles one completion: it retires every WR of its QP up to it.
  void OnCompletion(const ibv_wc& wc);
  // Records that `chunk` ended with `status`; finishes its operation when
  // it was the last one.
  void ChunkDone(const Chunk& chunk, const absl::Status& status);
  // Finishes `op` once nothing of it is left: every WR completed, and the
  // ack of its notice came (unless it failed already).
  void MaybeFinish(const std::shared_ptr<OpState>& op);
  void FinishOp(const std::shared_ptr<OpState>& op);
  // Moves a QP to the error state: its posted WRs are flushed (each
  // completes with an error, signaled or not), and the channel stops taking
  // new operations until the peer layer rebuilds the pool.
  void SetError(size_t qp_index, const absl::Status& why);
  // Fails pending (not yet posted) chunks of operations that already
  // failed, and all pending chunks once the channel is broken.
  void DropPending();
  // The deadline timer fired: expires every operation whose deadline
  // passed and re-arms it for the earliest one left.
  void ExpireDue();
  void Expire(const std::shared_ptr<OpState>& op);

  // --- verbs_channel_notices.cc ---
  // Before the channel is shared: the slots for notices and acks, and
  // kNoticeCredits receives posted on every QP for the acks.
  absl::Status StartNotices();
  // Posts QP `qp_index`'s receives for acks (kNoticeCredits).
  absl::Status PostAckReceives(size_t qp_index);
  // Queues the WRs of a WRITE with an immediate, then its notice, on one QP.
  void QueueWithNotice(const std::shared_ptr<OpState>& state);
  // How many of QP `qp_index`'s pinned chunks may be posted now: send-queue
  // slots, the chain limit, and for a notice a credit and a SEND slot.
  size_t PinnedReady(size_t qp_index) const;
  // Writes the notice of `chunk` into the next SEND slot of the QP and
  // fills `wr` with the SEND; the QP then awaits its ack.
  void PrepareNotice(size_t qp_index, const Chunk& chunk, RdmaOp& wr);
  // A receive completion: the peer's ack of one of our notices.
  void OnAck(const WorkRequestId& id, const ibv_wc& wc);
  // A QP failed: acks that were awaited on it will not come.
  void AbandonAcks(size_t qp_index);

  const VerbsChannelOptions options_;
  runtime::EventLoop* const loop_;  // Not owned.
  const std::shared_ptr<CompletionQueue> cq_;

  // Receive slots for acks, then SEND slots for notices, kNoticeCredits
  // each per QP. Before qps_, so the QPs whose receives point into it are
  // destroyed first (Teardown and the destructor also do that explicitly).
  std::unique_ptr<NoticeBuffers> notice_buffers_;

  // Loop thread only (set up in Start, before the channel is shared).
  std::vector<QpState> qps_;
  std::deque<Chunk> pending_;
  std::list<std::shared_ptr<OpState>> ops_;
  // Finished operations' states, in their list nodes, for NewOpState: in
  // a steady stream, accepting an operation allocates nothing. A state is
  // reused only once nothing else holds it, and never one that had a
  // notice (its ack's weak reference may outlive it). At most
  // kMaxSpareOps.
  static constexpr size_t kMaxSpareOps = 256;
  std::list<std::shared_ptr<OpState>> spare_ops_;
  // The QPs the notice slots are laid out for: the pool's most (growth
  // included), so that a QP added later finds its slots.
  size_t slot_qps_ = 0;
  QpGrowth growth_;
  uint64_t chunk_bytes_ = 0;
  uint64_t read_chunk_bytes_ = 0;  // <= chunk_bytes_
  uint32_t inline_max_ = UINT32_MAX;
  size_t next_qp_ = 0;
  size_t inflight_ = 0;  // WRs on all send queues
  size_t awaiting_acks_ = 0;  // notices on all QPs whose ack is due
  uint64_t cq_watch_ = 0;
  // Every operation's deadline, as one timer (ExpireDue).
  runtime::EarliestDeadline deadlines_;
  bool armed_ = false;
  bool torn_down_ = false;
  std::string last_error_;

  std::atomic<bool> broken_{false};
  transport::OpInbox inbox_;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_CHANNEL_IMPL_H_
