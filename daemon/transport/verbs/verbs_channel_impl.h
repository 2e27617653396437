// Internals of VerbsChannel (verbs_channel.h), shared by its two source
// files: verbs_channel.cc (operations: checking, chunking, posting chains,
// closing) and verbs_channel_completions.cc (the CQ: polling, completions,
// errors, deadlines). Not a public header.
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

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/runtime/event_loop.h"
#include "daemon/transport/verbs/verbs_channel.h"

namespace rdmad::verbs {

class VerbsChannel::Impl : public runtime::Poller,
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
    uint64_t deadline_timer = 0;
    bool expired = false;      // deadline handled
    absl::Time posted_at;
    std::list<std::shared_ptr<OpState>>::iterator position;  // in ops_
  };

  // One work request's worth of an operation.
  struct Chunk {
    std::shared_ptr<OpState> op;
    uint64_t offset = 0;  // inside the operation
    uint32_t length = 0;
  };

  // A WR on a QP's send queue, in posting order.
  struct Posted {
    uint64_t seq = 0;  // low bits of the wr_id
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
  };

  // --- verbs_channel.cc ---
  void TakeIncoming();
  void StartOps(absl::Span<transport::RemoteOp> ops);
  absl::Status Check(const transport::RemoteOp& op) const;
  uint32_t LkeyOf(const transport::RemoteOp& op) const;
  // Posts pending chunks while QPs have free send-queue slots.
  void Pump();
  void PostChain(size_t qp_index, size_t n);
  void Teardown();
  absl::Status ClosedError() const;
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
  void FinishOp(const std::shared_ptr<OpState>& op);
  // Moves a QP to the error state: its posted WRs are flushed (each
  // completes with an error, signaled or not), and the channel stops taking
  // new operations until the peer layer rebuilds the pool.
  void SetError(size_t qp_index, const absl::Status& why);
  // Fails pending (not yet posted) chunks of operations that already
  // failed, and all pending chunks once the channel is broken.
  void DropPending();
  void Expire(const std::shared_ptr<OpState>& op);

  const VerbsChannelOptions options_;
  runtime::EventLoop* const loop_;  // Not owned.
  const std::shared_ptr<CompletionQueue> cq_;

  // Loop thread only (set up in Start, before the channel is shared).
  std::vector<QpState> qps_;
  std::deque<Chunk> pending_;
  std::list<std::shared_ptr<OpState>> ops_;
  uint64_t chunk_bytes_ = 0;
  uint32_t inline_max_ = UINT32_MAX;
  size_t next_qp_ = 0;
  size_t inflight_ = 0;  // WRs on all send queues
  uint64_t cq_watch_ = 0;
  bool armed_ = false;
  bool torn_down_ = false;
  std::string last_error_;

  std::atomic<bool> broken_{false};
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<transport::RemoteOp> incoming_ ABSL_GUARDED_BY(mu_);
};

// wr_id = QP index in the pool (top 8 bits) | sequence on that QP.
inline constexpr int kWrIdQpShift = 56;
inline constexpr uint64_t kWrIdSeqMask = (uint64_t{1} << kWrIdQpShift) - 1;

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_CHANNEL_IMPL_H_
