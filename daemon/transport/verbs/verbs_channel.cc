// VerbsChannel: operations (checking, chunking, posting chains) and the
// channel's life. Its QPs, at the start and as the pool grows, are in
// verbs_channel_pool.cc; the CQ side is in verbs_channel_completions.cc.
#include "daemon/transport/verbs/verbs_channel.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/runtime/coarse_clock.h"
#include "daemon/transport/verbs/conversions.h"
#include "daemon/transport/verbs/verbs_channel_impl.h"

namespace rdmad::verbs {

VerbsChannel::Impl::Impl(VerbsChannelOptions options,
                         std::shared_ptr<CompletionQueue> cq)
    : options_(std::move(options)),
      loop_(options_.loop),
      cq_(std::move(cq)),
      growth_(options_.growth),
      deadlines_(loop_, [this] { ExpireDue(); }) {
  chunk_bytes_ = options_.chunk_bytes;
  read_chunk_bytes_ = std::min(options_.read_chunk_bytes, chunk_bytes_);
}

VerbsChannel::Impl::~Impl() {
  // Normally Teardown ran on the loop. If the loop had already finished
  // (daemon shutdown), destroy the QPs and fail what is left here.
  if (!torn_down_) {
    for (QpState& q : qps_) q.qp.reset();
    for (auto& op : inbox_.TakeAll()) op.done(ClosedError());
    for (auto& op : ops_) {
      if (op->op.done) op->op.done(ClosedError());
    }
  }
}

absl::Status VerbsChannel::Impl::ClosedError() const {
  return absl::UnavailableError(absl::StrCat(
      "the verbs data channel to peer ", options_.peer, " was closed"));
}

absl::Status VerbsChannel::Impl::BrokenError() const {
  return absl::UnavailableError(absl::StrCat(
      "a QP to peer ", options_.peer, " failed (", last_error_,
      "); the QP pool is being rebuilt, retry"));
}

void VerbsChannel::Impl::Post(absl::Span<transport::RemoteOp> ops) {
  inbox_.Post(shared_from_this(), *loop_, ops);
}

absl::StatusOr<uint32_t> VerbsChannel::Impl::CheckedLkey(
    const transport::RemoteOp& op) const {
  if (op.length == 0 || op.local == nullptr || op.local_addr == nullptr) {
    return absl::InvalidArgumentError(
        "a verbs operation needs a local region, an address and a length");
  }
  if (op.immediate.has_value() &&
      (op.op != core::OpType::kWrite || op.remote == nullptr)) {
    return absl::InvalidArgumentError(
        "only a WRITE to a resolved remote region can carry an immediate");
  }
  if (op.notify_before > op.remote_offset ||
      (op.notify_before != 0 && !op.immediate.has_value())) {
    return absl::InvalidArgumentError(
        "a notification can only cover bytes before a WRITE with an "
        "immediate inside its region");
  }
  uint32_t lkey = 0;
  for (const auto& k : op.local->local_keys()) {
    if (k.device == options_.local_device) {
      lkey = k.lkey;
      break;
    }
  }
  if (lkey == 0 && op.local->memory().is_dmabuf()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "local region ", op.local->id(), " is a dma-buf, and device ",
        options_.local_device,
        " does not register dma-bufs (its driver "
        "lacks ibv_reg_dmabuf_mr; see rdmactl devices): reach this peer "
        "through a device that does"));
  }
  if (lkey == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "local region ", op.local->id(), " is not registered on device ",
        options_.local_device, ": it was created before the device was "
        "opened; allocate it again"));
  }
  return lkey;
}

void VerbsChannel::Impl::StartOps(absl::Span<transport::RemoteOp> ops) {
  if (torn_down_) {
    const absl::Status closed = ClosedError();
    for (transport::RemoteOp& op : ops) op.done(closed);
    return;
  }
  // Only an expiry's message reads it: the coarse clock will do.
  const absl::Time now = runtime::CoarseNow();
  for (transport::RemoteOp& op : ops) {
    absl::StatusOr<uint32_t> lkey = CheckedLkey(op);
    if (!lkey.ok()) {
      op.done(std::move(lkey).status());
      continue;
    }
    if (broken_.load()) {
      op.done(BrokenError());
      continue;
    }
    const std::shared_ptr<OpState>& state = NewOpState();
    state->posted_at = now;
    state->lkey = *lkey;
    const uint64_t length = op.length;
    state->op = std::move(op);
    if (state->op.immediate.has_value()) {
      QueueWithNotice(state);
    } else {
      const uint64_t chunk = state->op.op == core::OpType::kRead
                                 ? read_chunk_bytes_
                                 : chunk_bytes_;
      for (uint64_t off = 0; off < length; off += chunk) {
        pending_.push_back(Chunk{
            state, off,
            static_cast<uint32_t>(std::min<uint64_t>(chunk, length - off))});
        ++state->chunks_left;
      }
    }
    deadlines_.Consider(state->op.deadline);
  }
  // The whole batch is queued: post it as chains, one per QP.
  Pump();
}

const std::shared_ptr<VerbsChannel::Impl::OpState>&
VerbsChannel::Impl::NewOpState() {
  if (!spare_ops_.empty() && spare_ops_.back().use_count() == 1) {
    ops_.splice(ops_.end(), spare_ops_, std::prev(spare_ops_.end()));
    *ops_.back() = OpState();
  } else {
    ops_.push_back(std::make_shared<OpState>());
  }
  ops_.back()->position = std::prev(ops_.end());
  return ops_.back();
}

void VerbsChannel::Impl::Pump() {
  DropPending();
  // WRITEs with an immediate first: their WRs may only go on their QP.
  for (size_t i = 0; i < qps_.size() && !broken_.load(); ++i) {
    const QpState& q = qps_[i];
    if (q.error || !q.qp || q.pinned.empty()) continue;
    if (const size_t n = PinnedReady(i); n > 0) {
      PostChain(i, qps_[i].pinned, n);
    }
  }
  while (!pending_.empty() && !broken_.load()) {
    size_t healthy = 0;
    size_t best = qps_.size();
    size_t best_free = 0;
    for (size_t i = 0; i < qps_.size(); ++i) {
      // Start the search at a rotating QP so that ties spread the load.
      const size_t index = (next_qp_ + i) % qps_.size();
      QpState& q = qps_[index];
      if (q.error || !q.qp) continue;
      ++healthy;
      const size_t free = q.slots - q.inflight.size();
      if (free > best_free) {
        best = index;
        best_free = free;
      }
    }
    next_qp_ = (next_qp_ + 1) % qps_.size();
    if (best == qps_.size()) break;  // all full: completions pump again
    // Share the queue among the QPs, so one large operation is spread;
    // but give each chain at least kMinShareBytes: small operations go as
    // one chain on one QP, since every ibv_post_send is a system call (on
    // rxe, the whole requester too), and splitting a batch of them among
    // the QPs would multiply those without moving bytes any sooner.
    const size_t limit = std::min(best_free, size_t{options_.max_chain});
    size_t share = (pending_.size() + healthy - 1) / healthy;
    uint64_t bytes = 0;
    for (size_t k = 0; k < limit && k < pending_.size(); ++k) {
      if (bytes >= kMinShareBytes) break;
      bytes += pending_[k].length;
      share = std::max(share, k + 1);
    }
    const size_t n = std::min(limit, share);
    PostChain(best, pending_, n);
  }
  MaybeGrow();
}

void VerbsChannel::Impl::PostChain(size_t qp_index, std::deque<Chunk>& from,
                                   size_t n) {
  QpState& q = qps_[qp_index];
  // Signal often enough that unsignaled WRs never hold more than half the
  // send queue, so completions keep freeing slots.
  const uint32_t signal_every = std::max<uint32_t>(1, q.slots / 2);
  // The chain is built on the stack and its chunks move straight onto the
  // QP's in-flight queue: a post allocates nothing (QueuePair::Post keeps
  // chains of up to kMaxChainOnStack on its stack too).
  RdmaOp wrs[QueuePair::kMaxChainOnStack];
  n = std::min(n, QueuePair::kMaxChainOnStack);
  for (size_t i = 0; i < n; ++i) {
    Chunk& c = from.front();
    const transport::RemoteOp& op = c.op->op;
    RdmaOp& wr = wrs[i];
    wr = RdmaOp();
    const uint64_t seq = q.next_seq + i;
    if (c.notice) {
      PrepareNotice(qp_index, c, wr);
    } else {
      wr.opcode = op.op == core::OpType::kWrite ? RdmaOp::Opcode::kWrite
                                                : RdmaOp::Opcode::kRead;
      wr.local_addr = op.local_addr + c.offset;
      wr.length = c.length;
      wr.lkey = c.op->lkey;
      wr.remote_addr = op.key.base + op.remote_offset + c.offset;
      wr.rkey = static_cast<uint32_t>(op.key.key);
      wr.inline_data =
          wr.opcode == RdmaOp::Opcode::kWrite && c.length <= inline_max_;
    }
    const WorkRequestId id = WorkRequestId::Send(qp_index, seq);
    wr.wr_id = id.Encode();
    const bool last = i + 1 == n;
    wr.signaled = last || q.unsignaled_run + 1 >= signal_every;
    q.unsignaled_run = wr.signaled ? 0 : q.unsignaled_run + 1;
    q.inflight.push_back(Posted{id.sequence, std::move(c)});
    from.pop_front();
  }
  size_t done = 0;
  absl::Status s = q.qp->Post(absl::MakeConstSpan(wrs, n), &done);
  ++q.post_calls;
  inflight_ += done;
  q.next_seq += n;
  q.posted += done;
  if (!s.ok()) {
    // The WRs after `done` never reached the NIC: take them back, mark the
    // QP failed (so that no callback below posts on it), then fail them.
    // The ones before `done` may be unsignaled: the error state flushes
    // them.
    std::vector<Chunk> refused;
    refused.reserve(n - done);
    for (size_t i = done; i < n; ++i) {
      refused.push_back(std::move(q.inflight[q.inflight.size() - n + i].chunk));
    }
    q.inflight.resize(q.inflight.size() - (n - done));
    ++q.errors;
    SetError(qp_index, s);
    for (const Chunk& c : refused) {
      if (c.notice) --q.notice_sends_inflight;
      ChunkDone(c, absl::UnavailableError(s.message()));
    }
    DropPending();
  }
}

transport::ChannelInfo VerbsChannel::Impl::Describe() const {
  transport::ChannelInfo info;
  info.kind = core::TransportKind::kVerbs;
  info.state = transport::ChannelState::kClosed;
  // QPs are touched only on the loop: describe them there.
  std::shared_ptr<const Impl> self = shared_from_this();
  absl::Status s = runtime::RunOnLoop(
      loop_, [self, &info]() -> absl::Status {
        info.state = self->torn_down_           ? transport::ChannelState::kClosed
                     : self->broken_.load()     ? transport::ChannelState::kError
                                                : transport::ChannelState::kReady;
        info.last_error = self->last_error_;
        for (size_t i = 0; i < self->qps_.size(); ++i) {
          const QpState& q = self->qps_[i];
          transport::ConnectionInfo c;
          c.index = static_cast<uint32_t>(i);
          c.device = self->options_.local_device;
          c.remote_qpn = q.remote_qpn;
          if (q.qp) {
            c.local_qpn = q.qp->qpn();
            auto state = q.qp->QueryState();
            c.qp_state = state.ok() ? QpStateName(*state) : "UNKNOWN";
            c.state = q.error ? transport::ConnectionState::kError
                              : transport::ConnectionState::kReady;
            if (auto port = q.qp->cq()->device()->QueryPort(q.qp->config().port);
                port.ok()) {
              c.path_mtu = std::min(MtuToBytes(port->active_mtu),
                                    q.qp->config().path_mtu == 0
                                        ? UINT32_MAX
                                        : q.qp->config().path_mtu);
            }
          } else {
            c.qp_state = "DESTROYED";
            c.state = transport::ConnectionState::kClosed;
          }
          c.posted = q.posted;
          c.post_calls = q.post_calls;
          c.completed = q.completed;
          c.errors = q.errors;
          c.outstanding = static_cast<uint32_t>(q.inflight.size());
          c.generation = self->options_.generation;
          info.connections.push_back(std::move(c));
        }
        return absl::OkStatus();
      },
      absl::Seconds(2));
  if (!s.ok()) info.last_error = std::string(s.message());
  return info;
}

void VerbsChannel::Impl::ForceError(size_t index) {
  loop_->Post([self = shared_from_this(), index] {
    if (index < self->qps_.size() && !self->torn_down_) {
      self->SetError(index, absl::AbortedError("QP forced into the error state"));
    }
  });
}

void VerbsChannel::Impl::Close() {
  if (!inbox_.Close()) return;
  // Always through the loop, also from the loop thread itself: the caller
  // may be inside one of this channel's callbacks.
  loop_->Post([self = shared_from_this()] { self->Teardown(); });
}

void VerbsChannel::Impl::Teardown() {
  if (torn_down_) return;
  torn_down_ = true;
  if (cq_watch_ != 0) loop_->Unwatch(cq_watch_);
  cq_watch_ = 0;
  loop_->RemovePoller(this);
  // Destroying the QPs first guarantees the NIC no longer touches any
  // operation's memory when its callback runs.
  for (QpState& q : qps_) {
    if (q.grace_timer != 0) loop_->CancelTimer(q.grace_timer);
    q.grace_timer = 0;
    q.inflight.clear();
    q.qp.reset();
  }
  inflight_ = 0;
  pending_.clear();
  for (QpState& q : qps_) {
    q.pinned.clear();
    q.awaiting.clear();
  }
  awaiting_acks_ = 0;
  notice_buffers_.reset();
  const absl::Status closed = ClosedError();
  std::list<std::shared_ptr<OpState>> ops;
  ops.swap(ops_);
  deadlines_.Cancel();
  for (auto& op : ops) {
    if (op->op.done) {
      transport::OpCallback done = std::move(op->op.done);
      op->op.done = nullptr;
      done(closed);
    }
  }
  for (auto& op : inbox_.TakeAll()) op.done(closed);
}

absl::StatusOr<std::unique_ptr<VerbsChannel>> VerbsChannel::Create(
    VerbsChannelOptions options, std::shared_ptr<CompletionQueue> cq,
    std::vector<std::unique_ptr<QueuePair>> qps,
    std::vector<uint32_t> remote_qpns) {
  if (options.loop == nullptr) {
    return absl::InvalidArgumentError("a verbs channel needs an event loop");
  }
  if (options.chunk_bytes == 0) options.chunk_bytes = 1ull << 20;
  if (options.read_chunk_bytes == 0) {
    options.read_chunk_bytes = kDefaultReadChunkBytes;
  }
  if (options.max_chain == 0) options.max_chain = 1;
  auto impl = std::make_shared<Impl>(std::move(options), std::move(cq));
  RDMAD_RETURN_IF_ERROR(impl->Start(std::move(qps), std::move(remote_qpns)));
  return std::unique_ptr<VerbsChannel>(new VerbsChannel(std::move(impl)));
}

VerbsChannel::VerbsChannel(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
VerbsChannel::~VerbsChannel() { Close(); }

absl::StatusOr<transport::RemoteKey> VerbsChannel::KeyFor(
    const core::RemoteRegionInfo& region) const {
  const std::string& device = impl_->remote_device();
  for (const auto& k : region.rkeys) {
    if (k.device == device && k.rkey != 0) {
      return transport::RemoteKey{region.addr, k.rkey};
    }
  }
  return absl::FailedPreconditionError(absl::StrCat(
      core::RemoteRegionLabel(region), " on peer ", region.peer,
      " has no rkey for its device ", device,
      ": it is not exported over verbs; export it again on that node"));
}

void VerbsChannel::Post(absl::Span<transport::RemoteOp> ops) {
  impl_->Post(ops);
}
transport::ChannelInfo VerbsChannel::Describe() const {
  return impl_->Describe();
}
bool VerbsChannel::NeedsReconnect() const { return impl_->NeedsReconnect(); }
void VerbsChannel::Close() { impl_->Close(); }
void VerbsChannel::ForceError(size_t index) { impl_->ForceError(index); }

}  // namespace rdmad::verbs
