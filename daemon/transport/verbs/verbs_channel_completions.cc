// VerbsChannel: the completion side. The CQ is polled on every turn of the
// loop while WRs are in flight (runtime::Poller) and watched through its
// completion channel when the loop sleeps; completions retire WRs, failures
// move QPs to the error state, and deadlines are one loop timer per channel.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/runtime/turn_batch.h"
#include "daemon/transport/verbs/conversions.h"
#include "daemon/transport/verbs/verbs_channel_impl.h"
#include "spdlog/spdlog.h"

namespace rdmad::verbs {
namespace {

constexpr size_t kCompletionsPerPoll = 32;

}  // namespace

bool VerbsChannel::Impl::Drain() {
  if (torn_down_) return false;
  // The operations these completions finish are handed back as one batch:
  // a client's ring is published (and the client woken) once per drain,
  // not once per operation. The loop's own scope covers callbacks but not
  // its pollers, and Poll() drains from there.
  runtime::TurnBatch::Scope batch;
  ibv_wc wcs[kCompletionsPerPoll];
  bool any = false;
  for (;;) {
    auto polled = cq_->Poll(absl::MakeSpan(wcs, kCompletionsPerPoll));
    if (!polled.ok()) {
      spdlog::error("peer {}: {}", options_.peer,
                    std::string(polled.status().message()));
      break;
    }
    for (size_t i = 0; i < *polled; ++i) OnCompletion(wcs[i]);
    any |= *polled > 0;
    if (*polled < kCompletionsPerPoll || torn_down_) break;
  }
  if (any) Pump();
  return any;
}

bool VerbsChannel::Impl::Poll() {
  // Nothing in flight and no ack due: no completion can come (bar an
  // unsolicited SEND, which the armed CQ reports).
  if ((inflight_ == 0 && awaiting_acks_ == 0) || torn_down_) return false;
  armed_ = false;
  return Drain();
}

bool VerbsChannel::Impl::PrepareToSleep() {
  if (torn_down_ || armed_) return false;
  if (absl::Status s = cq_->Arm(); !s.ok()) {
    spdlog::error("peer {}: {}", options_.peer, std::string(s.message()));
    return false;
  }
  armed_ = true;
  // A completion that arrived before the arm raises no event.
  return Drain();
}

void VerbsChannel::Impl::OnCqEvent() {
  if (torn_down_) return;
  if (auto events = cq_->ConsumeEvents(); !events.ok()) {
    spdlog::error("peer {}: {}", options_.peer,
                  std::string(events.status().message()));
  }
  armed_ = false;
  Drain();
  // Re-armed by PrepareToSleep before the loop sleeps again.
}

void VerbsChannel::Impl::OnCompletion(const ibv_wc& wc) {
  const WorkRequestId id = WorkRequestId::Decode(wc.wr_id);
  if (id.receive) return OnAck(id, wc);
  const size_t index = id.qp;
  const uint64_t seq = id.sequence;
  if (index >= qps_.size()) {
    spdlog::error("peer {}: completion with an unknown wr_id", options_.peer);
    return;
  }
  QpState& q = qps_[index];
  const absl::Status wc_status = CompletionStatus(wc);
  if (!wc_status.ok() && !q.error) {
    ++q.errors;
    SetError(index, wc_status);
  }
  while (!q.inflight.empty() && q.inflight.front().seq <= seq) {
    Posted p = std::move(q.inflight.front());
    q.inflight.pop_front();
    --inflight_;
    if (p.chunk.notice) --q.notice_sends_inflight;
    absl::Status status;
    if (p.seq < seq || wc_status.ok()) {
      // RC completes in order and a failed WR always completes: every WR
      // before this one succeeded.
      ++q.completed;
    } else if (wc.status == IBV_WC_WR_FLUSH_ERR) {
      status = absl::UnavailableError(absl::StrCat(
          "the operation was flushed from a failed QP to peer ",
          options_.peer, ": ", last_error_));
    } else if (p.chunk.notice && wc.status == IBV_WC_RNR_RETRY_EXC_ERR) {
      // No receive posted for it, even after retries: a peer that does not
      // take notices (an rdmad from before WRITE with an immediate over
      // verbs). The data was written; nobody was told.
      status = absl::FailedPreconditionError(absl::StrCat(
          "peer ", options_.peer,
          " does not accept notifications of a WRITE with an immediate over "
          "verbs (no receive posted for the notice: an older rdmad?); the "
          "data was written to ",
          core::RemoteRegionLabel(*p.chunk.op->op.remote),
          " but its owner was not told. Upgrade that daemon, or reach it over "
          "TCP (--transport=tcp)"));
    } else {
      status = wc_status;
      if (status.code() == absl::StatusCode::kPermissionDenied) {
        status = absl::PermissionDeniedError(absl::StrCat(
            "peer ", options_.peer, " refused the RDMA access to ",
            core::RemoteRegionLabel(*p.chunk.op->op.remote),
            ": it is no longer exported with that access, was freed, or the "
            "range is outside it (",
            wc_status.message(), ")"));
      }
    }
    ChunkDone(p.chunk, status);
  }
}

void VerbsChannel::Impl::ChunkDone(const Chunk& chunk,
                                   const absl::Status& status) {
  OpState& op = *chunk.op;
  if (!status.ok() && op.status.ok()) op.status = status;
  if (--op.chunks_left == 0) MaybeFinish(chunk.op);
}

void VerbsChannel::Impl::MaybeFinish(const std::shared_ptr<OpState>& op) {
  if (op->chunks_left > 0) return;
  // Everything was posted and completed; a WRITE with an immediate that
  // went well still waits for the peer to say its owner was told.
  if (op->awaiting_ack && op->status.ok()) return;
  FinishOp(op);
}

void VerbsChannel::Impl::FinishOp(const std::shared_ptr<OpState>& op) {
  if (!op->op.done) return;
  // Held here: the caller's reference may be one a callback drops.
  const std::shared_ptr<OpState> finished = op;
  transport::OpCallback done = std::move(finished->op.done);
  finished->op.done = nullptr;
  // Nothing of it is on a QP or queued any more (chunks_left is 0): its
  // state can serve another operation once the callers let go of it.
  const bool keep = !finished->op.immediate.has_value() &&
                    spare_ops_.size() < kMaxSpareOps;
  if (keep) {
    spare_ops_.splice(spare_ops_.end(), ops_, finished->position);
  } else {
    ops_.erase(finished->position);
  }
  done(finished->status);
  // A spare must not keep the operation's regions alive.
  if (keep) finished->op = transport::RemoteOp();
}

void VerbsChannel::Impl::SetError(size_t qp_index, const absl::Status& why) {
  QpState& q = qps_[qp_index];
  if (!q.error) {
    q.error = true;
    if (q.qp) {
      if (absl::Status s = q.qp->ModifyToError(); !s.ok()) {
        spdlog::warn("peer {}: {}", options_.peer, std::string(s.message()));
      }
    }
    // Flushed WRs normally all come back; a QP that stopped anyway has
    // whatever it still holds retired after the grace period.
    q.grace_timer =
        loop_->RunAt(absl::Now() + options_.flush_grace, [this, qp_index] {
          QpState& failed = qps_[qp_index];
          failed.grace_timer = 0;
          while (!failed.inflight.empty()) {
            Posted p = std::move(failed.inflight.front());
            failed.inflight.pop_front();
            --inflight_;
            if (p.chunk.notice) --failed.notice_sends_inflight;
            ChunkDone(p.chunk, BrokenError());
          }
        });
    // Its receives are flushed: the acks still due on it will not come.
    AbandonAcks(qp_index);
  }
  if (!broken_.load()) {
    broken_.store(true);
    last_error_ = std::string(why.message());
    // QP numbers are connection parameters: debug level only.
    spdlog::warn("peer {}: a verbs QP failed: {}; the pool will be rebuilt "
                 "on next use",
                 options_.peer, last_error_);
    spdlog::debug("peer {}: failed QP is 0x{:06x}", options_.peer,
                  q.qp ? q.qp->qpn() : 0);
  }
}

void VerbsChannel::Impl::DropPending() {
  // Taken out first: ChunkDone may finish an operation whose callback posts
  // new ones, which land in the queues while this runs.
  const auto drop = [this](std::deque<Chunk>& queue) {
    if (queue.empty()) return;
    std::deque<Chunk> chunks;
    chunks.swap(queue);
    for (Chunk& c : chunks) {
      const bool broken = broken_.load();
      if (broken || !c.op->status.ok()) {
        ChunkDone(c, broken ? BrokenError() : c.op->status);
      } else {
        queue.push_back(std::move(c));
      }
    }
  };
  drop(pending_);
  for (size_t i = 0; i < qps_.size(); ++i) drop(qps_[i].pinned);
}

void VerbsChannel::Impl::ExpireDue() {
  if (torn_down_) return;
  const absl::Time now = absl::Now();
  std::vector<std::shared_ptr<OpState>> due;
  absl::Time next = absl::InfiniteFuture();
  for (const std::shared_ptr<OpState>& op : ops_) {
    if (op->expired || !op->op.done) continue;
    if (op->op.deadline <= now) {
      due.push_back(op);
    } else {
      next = std::min(next, op->op.deadline);
    }
  }
  // Collected first: an expiry's callback may post (and finish) others,
  // which changes ops_ and may arm the timer itself.
  for (const std::shared_ptr<OpState>& op : due) Expire(op);
  deadlines_.Consider(next);
}

void VerbsChannel::Impl::Expire(const std::shared_ptr<OpState>& op) {
  if (op->expired || !op->op.done || torn_down_) return;
  op->expired = true;
  const absl::Time now = absl::Now();
  op->status = absl::DeadlineExceededError(absl::StrFormat(
      "the RDMA %s of %u bytes to peer %s did not complete within its "
      "deadline (%s after it was posted); its QPs are being rebuilt",
      op->op.op == core::OpType::kWrite ? "WRITE" : "READ", op->op.length,
      options_.peer, absl::FormatDuration(now - op->posted_at)));
  // Its WRs may still be written by the NIC: flush them through the error
  // state, and finish the operation when they come back.
  for (size_t i = 0; i < qps_.size(); ++i) {
    for (const Posted& p : qps_[i].inflight) {
      if (p.chunk.op == op) {
        SetError(i, op->status);
        break;
      }
    }
  }
  DropPending();
  // Only the ack of its notice was still due: nothing of the operation is
  // on a QP any more. (A late ack just returns its credit.)
  op->awaiting_ack = false;
  MaybeFinish(op);
}

}  // namespace rdmad::verbs
