#include "daemon/transport/verbs/verbs_channel.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <list>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "daemon/transport/verbs/conversions.h"
#include "spdlog/spdlog.h"

namespace rdmad::verbs {
namespace {

constexpr size_t kPollBatch = 32;

// One posted operation and what is left of it.
struct OpState {
  transport::RemoteOp op;
  transport::OpCallback done;
  uint64_t chunks_left = 0;  // pending or posted, not yet completed
  absl::Status status;       // first failure; OK while all went well
  bool expired = false;      // deadline handled
  absl::Time posted_at;
};

// One work request's worth of an operation.
struct Chunk {
  std::shared_ptr<OpState> op;
  uint64_t offset = 0;  // inside the operation
  uint32_t length = 0;
};

// A WR on a QP's send queue, in posting order.
struct Posted {
  uint64_t seq = 0;  // wr_id
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
  absl::Time error_since;
  uint64_t posted = 0, completed = 0, errors = 0;
  uint64_t post_calls = 0;  // ibv_post_send calls: posted / post_calls is
                            // the mean chain length
};

}  // namespace

class VerbsChannel::Impl {
 public:
  Impl(VerbsChannelOptions options, std::shared_ptr<CompletionQueue> cq,
       UniqueFd wake)
      : options_(std::move(options)), cq_(std::move(cq)), wake_(std::move(wake)) {}

  absl::Status Start(std::vector<std::unique_ptr<QueuePair>> qps,
                     std::vector<uint32_t> remote_qpns) {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < qps.size(); ++i) {
      QpState q;
      q.slots = qps[i]->max_send_wr();
      q.remote_qpn = i < remote_qpns.size() ? remote_qpns[i] : 0;
      chunk_bytes_ = std::min<uint64_t>(chunk_bytes_, qps[i]->max_message_size());
      inline_max_ = std::min(inline_max_, qps[i]->max_inline_data());
      q.qp = std::move(qps[i]);
      qps_.push_back(std::move(q));
    }
    if (qps_.empty()) {
      return absl::InvalidArgumentError("a verbs channel needs at least one QP");
    }
    if (absl::Status s = cq_->Arm(); !s.ok()) return s;
    poller_ = std::thread([this] { PollLoop(); });
    return absl::OkStatus();
  }

  // With `pump` false the operation only joins the queue (a PostBatch is
  // open): Flush() posts it.
  void Post(transport::RemoteOp op, transport::OpCallback done, bool pump) {
    absl::Status bad = Check(op);
    if (!bad.ok()) return done(std::move(bad));
    auto state = std::make_shared<OpState>();
    state->posted_at = absl::Now();
    state->done = std::move(done);
    const uint64_t length = op.length;
    state->op = std::move(op);
    std::vector<Finished> finished;
    {
      absl::MutexLock lock(&mu_);
      if (closed_ || broken_) {
        absl::Status s = closed_ ? Closed() : Broken();
        state->done(std::move(s));
        return;
      }
      uint64_t chunks = 0;
      for (uint64_t off = 0; off < length; off += chunk_bytes_) {
        pending_.push_back(Chunk{
            state, off,
            static_cast<uint32_t>(std::min<uint64_t>(chunk_bytes_, length - off))});
        ++chunks;
      }
      state->chunks_left = chunks;
      ops_.push_back(state);
      if (pump) Pump(finished);
    }
    RunFinished(finished);
  }

  void Flush() {
    std::vector<Finished> finished;
    {
      absl::MutexLock lock(&mu_);
      Pump(finished);
    }
    RunFinished(finished);
  }

  transport::ChannelInfo Describe() const {
    transport::ChannelInfo info;
    info.kind = v1::TRANSPORT_VERBS;
    absl::MutexLock lock(&mu_);
    info.state = closed_ ? "CLOSED" : broken_ ? "ERROR" : "READY";
    info.last_error = last_error_;
    for (size_t i = 0; i < qps_.size(); ++i) {
      const QpState& q = qps_[i];
      transport::ConnectionInfo c;
      c.index = static_cast<uint32_t>(i);
      c.device = options_.local_device;
      c.local_qpn = q.qp ? q.qp->qpn() : 0;
      c.remote_qpn = q.remote_qpn;
      if (q.qp) {
        auto state = q.qp->QueryState();
        c.state = state.ok() ? QpStateName(*state) : "UNKNOWN";
        if (auto port = q.qp->cq()->device()->QueryPort(q.qp->config().port);
            port.ok()) {
          c.path_mtu = std::min(MtuToBytes(port->active_mtu),
                                q.qp->config().path_mtu == 0
                                    ? UINT32_MAX
                                    : q.qp->config().path_mtu);
        }
      } else {
        c.state = "DESTROYED";
      }
      c.posted = q.posted;
      c.post_calls = q.post_calls;
      c.completed = q.completed;
      c.errors = q.errors;
      c.outstanding = static_cast<uint32_t>(q.inflight.size());
      c.generation = options_.generation;
      info.connections.push_back(std::move(c));
    }
    return info;
  }

  bool NeedsReconnect() const {
    absl::MutexLock lock(&mu_);
    return broken_;
  }

  void ForceError(size_t index) {
    absl::MutexLock lock(&mu_);
    if (index < qps_.size()) {
      SetError(qps_[index], absl::AbortedError("QP forced into the error state"));
    }
  }

  void Close() {
    // Serializes concurrent Close calls: only one may join the poller.
    absl::MutexLock close_lock(&close_mu_);
    {
      absl::MutexLock lock(&mu_);
      closed_ = true;
    }
    Wake();
    if (poller_.joinable() && poller_.get_id() != std::this_thread::get_id()) {
      poller_.join();
    }
    std::vector<Finished> finished;
    {
      absl::MutexLock lock(&mu_);
      // Destroying the QPs first guarantees the NIC no longer touches any
      // operation's memory when its callback runs.
      for (QpState& q : qps_) {
        q.inflight.clear();
        q.qp.reset();
      }
      pending_.clear();
      for (auto& op : ops_) {
        if (op->done) finished.push_back({std::move(op->done), Closed()});
      }
      ops_.clear();
    }
    RunFinished(finished);
  }

 private:
  struct Finished {
    transport::OpCallback done;
    absl::Status status;
  };

  static void RunFinished(std::vector<Finished>& finished) {
    for (Finished& f : finished) f.done(std::move(f.status));
    finished.clear();
  }

  absl::Status Closed() const {
    return absl::UnavailableError(absl::StrCat(
        "the verbs data channel to peer ", options_.peer, " was closed"));
  }
  absl::Status Broken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return absl::UnavailableError(absl::StrCat(
        "a QP to peer ", options_.peer, " failed (", last_error_,
        "); the QP pool is being rebuilt, retry"));
  }

  // Everything checkable before the NIC sees the operation.
  absl::Status Check(const transport::RemoteOp& op) const {
    if (op.length == 0 || op.local == nullptr || op.local_addr == nullptr) {
      return absl::InvalidArgumentError(
          "a verbs operation needs a local region, an address and a length");
    }
    const char* begin = op.local->data();
    if (op.local_addr < begin ||
        op.length > op.local->size() ||
        static_cast<uint64_t>(op.local_addr - begin) > op.local->size() - op.length) {
      return absl::OutOfRangeError("the local range lies outside its region");
    }
    bool have_lkey = false;
    for (const auto& k : op.local->local_keys()) {
      if (k.device == options_.local_device) have_lkey = true;
    }
    if (!have_lkey) {
      return absl::FailedPreconditionError(absl::StrCat(
          "local region ", op.local->id(), " is not registered on device ",
          options_.local_device, ": it was created before the device was "
          "opened; allocate it again"));
    }
    bool have_rkey = false;
    for (const auto& k : op.remote.rkeys) {
      if (k.device == options_.remote_device) have_rkey = true;
    }
    if (!have_rkey) {
      return absl::FailedPreconditionError(absl::StrCat(
          "remote region '", op.remote.region_name, "' on peer ", options_.peer,
          " has no rkey for its device ", options_.remote_device,
          ": it is not exported over verbs; export it again"));
    }
    return absl::OkStatus();
  }

  uint32_t LkeyOf(const transport::RemoteOp& op) const {
    for (const auto& k : op.local->local_keys()) {
      if (k.device == options_.local_device) return k.lkey;
    }
    return 0;
  }
  uint32_t RkeyOf(const transport::RemoteOp& op) const {
    for (const auto& k : op.remote.rkeys) {
      if (k.device == options_.remote_device) return k.rkey;
    }
    return 0;
  }

  // Records that `chunk` ended with `status`; finishes its operation when it
  // was the last one.
  void ChunkDone(const Chunk& chunk, const absl::Status& status,
                 std::vector<Finished>& finished)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    OpState& op = *chunk.op;
    if (!status.ok() && op.status.ok()) op.status = status;
    if (--op.chunks_left == 0) FinishOp(chunk.op, finished);
  }

  void FinishOp(const std::shared_ptr<OpState>& op,
                std::vector<Finished>& finished)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!op->done) return;
    finished.push_back({std::move(op->done), op->status});
    op->done = nullptr;
    ops_.remove(op);
  }

  // Moves a QP to the error state: its posted WRs are flushed (each
  // completes with an error, signaled or not), and the channel stops taking
  // new operations until the peer layer rebuilds the pool.
  void SetError(QpState& q, const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!q.error) {
      q.error = true;
      q.error_since = absl::Now();
      if (q.qp) {
        if (absl::Status s = q.qp->ModifyToError(); !s.ok()) {
          spdlog::warn("peer {}: {}", options_.peer, std::string(s.message()));
        }
      }
    }
    if (!broken_) {
      broken_ = true;
      last_error_ = std::string(why.message());
      // QP numbers are connection parameters: debug level only.
      spdlog::warn("peer {}: a verbs QP failed: {}; the pool will be "
                   "rebuilt on next use",
                   options_.peer, last_error_);
      spdlog::debug("peer {}: failed QP is 0x{:06x}", options_.peer,
                    q.qp ? q.qp->qpn() : 0);
    }
  }

  // Drops pending (not yet posted) chunks of operations that already failed,
  // and when the channel is broken, fails all pending chunks.
  void DropPending(std::vector<Finished>& finished)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::deque<Chunk> keep;
    for (Chunk& c : pending_) {
      if (broken_ || !c.op->status.ok()) {
        ChunkDone(c, broken_ ? Broken() : c.op->status, finished);
      } else {
        keep.push_back(std::move(c));
      }
    }
    pending_.swap(keep);
  }

  // Posts pending chunks while QPs have free send-queue slots.
  void Pump(std::vector<Finished>& finished) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    DropPending(finished);
    while (!pending_.empty() && !broken_) {
      size_t healthy = 0;
      QpState* best = nullptr;
      for (size_t i = 0; i < qps_.size(); ++i) {
        // Start the search at a rotating QP so that ties spread the load.
        QpState& q = qps_[(next_qp_ + i) % qps_.size()];
        if (q.error || !q.qp) continue;
        ++healthy;
        const size_t free = q.slots - q.inflight.size();
        if (free > 0 && (best == nullptr ||
                         free > best->slots - best->inflight.size())) {
          best = &q;
        }
      }
      next_qp_ = (next_qp_ + 1) % qps_.size();
      if (best == nullptr) return;  // all full: completions will pump again
      const size_t free = best->slots - best->inflight.size();
      // Share the queue among the QPs, so one large operation is spread.
      const size_t share = (pending_.size() + healthy - 1) / healthy;
      const size_t n = std::min({free, share, size_t{options_.max_chain}});
      PostChain(*best, n, finished);
    }
  }

  void PostChain(QpState& q, size_t n, std::vector<Finished>& finished)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Signal often enough that unsignaled WRs never hold more than half
    // the send queue, so completions keep freeing slots.
    const uint32_t signal_every = std::max<uint32_t>(1, q.slots / 2);
    std::vector<RdmaOp> wrs(n);
    std::vector<Posted> posted(n);
    for (size_t i = 0; i < n; ++i) {
      Chunk& c = pending_[i];
      const transport::RemoteOp& op = c.op->op;
      RdmaOp& wr = wrs[i];
      wr.opcode = op.op == core::OpType::kWrite ? RdmaOp::Opcode::kWrite
                                                : RdmaOp::Opcode::kRead;
      wr.wr_id = q.next_seq + i;
      wr.local_addr = op.local_addr + c.offset;
      wr.length = c.length;
      wr.lkey = LkeyOf(op);
      wr.remote_addr = op.remote.addr + op.remote.offset + c.offset;
      wr.rkey = RkeyOf(op);
      wr.inline_data = wr.opcode == RdmaOp::Opcode::kWrite &&
                       c.length <= inline_max_;
      const bool last = i + 1 == n;
      wr.signaled = last || q.unsignaled_run + 1 >= signal_every;
      q.unsignaled_run = wr.signaled ? 0 : q.unsignaled_run + 1;
      posted[i] = Posted{wr.wr_id, c};
    }
    size_t done = 0;
    absl::Status s = q.qp->Post(wrs, &done);
    ++q.post_calls;
    for (size_t i = 0; i < done; ++i) q.inflight.push_back(std::move(posted[i]));
    q.next_seq += n;
    q.posted += done;
    for (size_t i = 0; i < n; ++i) pending_.pop_front();
    if (!s.ok()) {
      // The WRs after `done` never reached the NIC; the ones before it may
      // be unsignaled, so flush them through the error state.
      ++q.errors;
      for (size_t i = done; i < n; ++i) {
        ChunkDone(posted[i].chunk, absl::UnavailableError(s.message()), finished);
      }
      SetError(q, s);
      DropPending(finished);
    }
  }

  // Handles one completion of QP `q`: it retires every WR up to wc.wr_id.
  void OnCompletion(QpState& q, const ibv_wc& wc,
                    std::vector<Finished>& finished)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Status wc_status = CompletionStatus(wc);
    if (!wc_status.ok() && !q.error) {
      ++q.errors;
      SetError(q, wc_status);
    }
    while (!q.inflight.empty() && q.inflight.front().seq <= wc.wr_id) {
      Posted p = std::move(q.inflight.front());
      q.inflight.pop_front();
      absl::Status status;
      if (p.seq < wc.wr_id || wc_status.ok()) {
        // RC completes in order and a failed WR always completes: every WR
        // before this one succeeded.
        ++q.completed;
      } else if (wc.status == IBV_WC_WR_FLUSH_ERR) {
        status = absl::UnavailableError(absl::StrCat(
            "the operation was flushed from a failed QP to peer ",
            options_.peer, ": ", last_error_));
      } else {
        status = wc_status;
        if (status.code() == absl::StatusCode::kPermissionDenied) {
          status = absl::PermissionDeniedError(absl::StrCat(
              "peer ", options_.peer, " refused the RDMA access to region '",
              p.chunk.op->op.remote.region_name,
              "': it is no longer exported with that access, was freed, or "
              "the range is outside it (", wc_status.message(), ")"));
        }
      }
      ChunkDone(p.chunk, status, finished);
    }
  }

  // Fails operations whose deadline passed: their QPs go to the error
  // state first, and they finish when the flushed WRs come back.
  void CheckDeadlines(absl::Time now, std::vector<Finished>& finished)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::shared_ptr<OpState>> expired;
    for (const auto& op : ops_) {
      if (!op->expired && op->op.deadline <= now) expired.push_back(op);
    }
    for (const auto& op : expired) {
      op->expired = true;
      op->status = absl::DeadlineExceededError(absl::StrFormat(
          "the RDMA %s of %u bytes to peer %s did not complete within its "
          "deadline (%s after it was posted); its QPs are being rebuilt",
          op->op.op == core::OpType::kWrite ? "WRITE" : "READ", op->op.length,
          options_.peer, absl::FormatDuration(now - op->posted_at)));
      for (QpState& q : qps_) {
        for (const Posted& p : q.inflight) {
          if (p.chunk.op == op) {
            SetError(q, op->status);
            break;
          }
        }
      }
    }
    if (!expired.empty()) DropPending(finished);
    // A QP in error whose flushes did not all come back in time has stopped
    // anyway: retire what it still holds.
    for (QpState& q : qps_) {
      if (q.error && !q.inflight.empty() &&
          now - q.error_since > options_.flush_grace) {
        while (!q.inflight.empty()) {
          Posted p = std::move(q.inflight.front());
          q.inflight.pop_front();
          ChunkDone(p.chunk, Broken(), finished);
        }
      }
    }
  }

  void Wake() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof(one));
  }

  void PollLoop() {
    ibv_wc wcs[kPollBatch];
    absl::Time spin_until = absl::InfinitePast();
    absl::Time next_tick = absl::Now() + options_.tick;
    for (;;) {
      std::vector<Finished> finished;
      size_t n = 0;
      {
        absl::MutexLock lock(&mu_);
        if (closed_) return;
        auto polled = cq_->Poll(absl::MakeSpan(wcs, kPollBatch));
        if (!polled.ok()) {
          spdlog::error("peer {}: {}", options_.peer, std::string(polled.status().message()));
        } else {
          n = *polled;
        }
        for (size_t i = 0; i < n; ++i) {
          for (QpState& q : qps_) {
            if (q.qp && q.qp->qpn() == wcs[i].qp_num) {
              OnCompletion(q, wcs[i], finished);
              break;
            }
          }
        }
        const absl::Time now = absl::Now();
        if (n > 0 || now >= next_tick) {
          if (n > 0) Pump(finished);
          CheckDeadlines(now, finished);
          next_tick = now + options_.tick;
        }
      }
      RunFinished(finished);
      const absl::Time now = absl::Now();
      if (n > 0) {
        spin_until = now + options_.spin;
        continue;
      }
      if (now < spin_until) continue;
      // Sleep on the completion channel: arm, then poll once more, since a
      // completion that arrived before the arm raises no event.
      if (absl::Status s = cq_->Arm(); !s.ok()) {
        spdlog::error("peer {}: {}", options_.peer, std::string(s.message()));
      }
      {
        absl::MutexLock lock(&mu_);
        if (closed_) return;
        auto polled = cq_->Poll(absl::MakeSpan(wcs, 1));
        if (polled.ok() && *polled > 0) {
          for (QpState& q : qps_) {
            if (q.qp && q.qp->qpn() == wcs[0].qp_num) {
              OnCompletion(q, wcs[0], finished);
              break;
            }
          }
          Pump(finished);
        }
      }
      if (!finished.empty()) {
        RunFinished(finished);
        spin_until = absl::Now() + options_.spin;
        continue;
      }
      pollfd fds[2] = {{cq_->event_fd(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
      const int timeout_ms = std::max<int64_t>(
          1, absl::ToInt64Milliseconds(next_tick - absl::Now()));
      const int rc = ::poll(fds, 2, timeout_ms);
      if (rc < 0 && errno != EINTR) {
        spdlog::error("peer {}: poll on the completion channel: {}",
                      options_.peer, std::strerror(errno));
      }
      if (rc > 0 && (fds[0].revents & POLLIN)) {
        // Several threads never share this CQ, so no lock is needed here.
        if (auto events = cq_->ConsumeEvents(); !events.ok()) {
          spdlog::error("peer {}: {}", options_.peer, std::string(events.status().message()));
        }
      }
      if (rc > 0 && (fds[1].revents & POLLIN)) {
        uint64_t value = 0;
        [[maybe_unused]] ssize_t r = ::read(wake_.get(), &value, sizeof(value));
      }
    }
  }

  const VerbsChannelOptions options_;
  const std::shared_ptr<CompletionQueue> cq_;
  const UniqueFd wake_;  // eventfd: wakes the poller for Close
  absl::Mutex close_mu_;
  std::thread poller_;

  mutable absl::Mutex mu_;
  std::vector<QpState> qps_ ABSL_GUARDED_BY(mu_);
  std::deque<Chunk> pending_ ABSL_GUARDED_BY(mu_);
  std::list<std::shared_ptr<OpState>> ops_ ABSL_GUARDED_BY(mu_);
  uint64_t chunk_bytes_ ABSL_GUARDED_BY(mu_) = options_.chunk_bytes;
  uint32_t inline_max_ ABSL_GUARDED_BY(mu_) = UINT32_MAX;
  size_t next_qp_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<VerbsChannel>> VerbsChannel::Create(
    VerbsChannelOptions options, std::shared_ptr<CompletionQueue> cq,
    std::vector<std::unique_ptr<QueuePair>> qps,
    std::vector<uint32_t> remote_qpns) {
  if (options.chunk_bytes == 0) options.chunk_bytes = 1ull << 20;
  if (options.max_chain == 0) options.max_chain = 1;
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) return absl::ErrnoToStatus(errno, "eventfd");
  auto impl = std::make_unique<Impl>(std::move(options), std::move(cq),
                                     std::move(wake));
  if (absl::Status s = impl->Start(std::move(qps), std::move(remote_qpns));
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<VerbsChannel>(new VerbsChannel(std::move(impl)));
}

VerbsChannel::VerbsChannel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VerbsChannel::~VerbsChannel() { Close(); }

void VerbsChannel::Post(transport::RemoteOp op, transport::OpCallback done) {
  bool defer = false;
  if (transport::PostBatch::Open()) {
    std::weak_ptr<transport::Flushable> self;
    if (std::shared_ptr<DataChannel> owned = weak_from_this().lock()) {
      self = std::static_pointer_cast<VerbsChannel>(std::move(owned));
    }
    defer = transport::PostBatch::Defer(self);
  }
  impl_->Post(std::move(op), std::move(done), /*pump=*/!defer);
}
void VerbsChannel::Flush() { impl_->Flush(); }
transport::ChannelInfo VerbsChannel::Describe() const { return impl_->Describe(); }
bool VerbsChannel::NeedsReconnect() const { return impl_->NeedsReconnect(); }
void VerbsChannel::Close() { impl_->Close(); }
void VerbsChannel::ForceError(size_t index) { impl_->ForceError(index); }

}  // namespace rdmad::verbs
