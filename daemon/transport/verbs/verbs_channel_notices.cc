// VerbsChannel: WRITEs with an immediate (verbs_notice.h). The WRs of such
// an operation and then its notice (a SEND) go on one QP, so RC places the
// data before the peer receives the notice; the operation completes when
// they all completed and the peer's ack came back on that QP. Each QP may
// have kNoticeCredits notices awaiting acks; the peer keeps as many
// receives posted, so a notice never meets RNR between two rdmad daemons.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/transport/verbs/conversions.h"
#include "daemon/transport/verbs/verbs_channel_impl.h"
#include "spdlog/spdlog.h"

namespace rdmad::verbs {
namespace {

uint64_t AckWrId(size_t qp_index, size_t slot) {
  return WorkRequestId::Receive(qp_index, slot).Encode();
}

}  // namespace

absl::Status VerbsChannel::Impl::StartNotices() {
  RDMAD_ASSIGN_OR_RETURN(
      notice_buffers_,
      NoticeBuffers::Create(cq_->device(), 2 * slot_qps_ * kNoticeCredits));
  for (size_t i = 0; i < qps_.size(); ++i) {
    RDMAD_RETURN_IF_ERROR(PostAckReceives(i));
  }
  return absl::OkStatus();
}

absl::Status VerbsChannel::Impl::PostAckReceives(size_t qp_index) {
  QueuePair& qp = *qps_[qp_index].qp;
  if (qp.max_recv_wr() < kNoticeCredits) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a verbs QP has room for ", qp.max_recv_wr(),
        " receives; the acks of notices need ", kNoticeCredits,
        ": raise QpConfig::max_recv_wr"));
  }
  for (size_t k = 0; k < kNoticeCredits; ++k) {
    const size_t slot = qp_index * kNoticeCredits + k;
    RDMAD_RETURN_IF_ERROR(
        notice_buffers_->PostRecv(qp, slot, AckWrId(qp_index, slot)));
  }
  return absl::OkStatus();
}

void VerbsChannel::Impl::QueueWithNotice(const std::shared_ptr<OpState>& state) {
  // The healthy QP with the most room, counting what is already pinned to
  // it; ties go round-robin.
  size_t best = qps_.size();
  int64_t best_room = INT64_MIN;
  for (size_t i = 0; i < qps_.size(); ++i) {
    const size_t index = (next_qp_ + i) % qps_.size();
    const QpState& q = qps_[index];
    if (q.error || !q.qp) continue;
    const int64_t room = static_cast<int64_t>(q.slots) -
                         static_cast<int64_t>(q.inflight.size() + q.pinned.size());
    if (room > best_room) {
      best = index;
      best_room = room;
    }
  }
  next_qp_ = (next_qp_ + 1) % qps_.size();
  if (best == qps_.size()) {
    // Every QP failed: the channel is broken, and Pump drops this at once.
    best = 0;
  }
  QpState& q = qps_[best];
  const uint64_t length = state->op.length;
  for (uint64_t off = 0; off < length; off += chunk_bytes_) {
    q.pinned.push_back(Chunk{
        state, off,
        static_cast<uint32_t>(std::min<uint64_t>(chunk_bytes_, length - off))});
    ++state->chunks_left;
  }
  q.pinned.push_back(Chunk{state, 0, 0, /*notice=*/true});
  ++state->chunks_left;
}

size_t VerbsChannel::Impl::PinnedReady(size_t qp_index) const {
  const QpState& q = qps_[qp_index];
  const size_t limit = std::min<size_t>(
      {q.slots - q.inflight.size(), size_t{options_.max_chain}, 64});
  uint32_t credits = q.credits;
  // An inline notice is copied into the WQE: its slot is free at once.
  uint32_t send_slots = kNoticeBytes <= inline_max_
                            ? UINT32_MAX
                            : kNoticeCredits - q.notice_sends_inflight;
  size_t n = 0;
  for (const Chunk& c : q.pinned) {
    if (n >= limit) break;
    if (c.notice) {
      // Wait for an ack to return a credit (and for a SEND slot).
      if (credits == 0 || send_slots == 0) break;
      --credits;
      --send_slots;
    }
    ++n;
  }
  return n;
}

void VerbsChannel::Impl::PrepareNotice(size_t qp_index, const Chunk& chunk,
                                       RdmaOp& wr) {
  QpState& q = qps_[qp_index];
  const transport::RemoteOp& op = chunk.op->op;
  Notice notice;
  notice.tag = q.next_tag++;
  notice.region_id = op.remote->region_id;
  // A striped WRITE's last piece announces the whole of it: its other
  // pieces completed before this one was posted.
  notice.offset = op.remote_offset - op.notify_before;
  notice.length = op.length + op.notify_before;
  notice.rkey = static_cast<uint32_t>(op.key.key);
  notice.immediate = *op.immediate;
  // SEND slots follow the receive slots and are used in turn. A notice
  // that goes inline is copied out at the post; otherwise a slot is reused
  // only after the SEND from it retired (PinnedReady keeps fewer than
  // kNoticeCredits of those in flight, and a QP retires its WRs in order).
  const size_t slot = (slot_qps_ + qp_index) * kNoticeCredits +
                      static_cast<size_t>(q.notices_sent % kNoticeCredits);
  const std::array<uint8_t, kNoticeBytes> bytes = EncodeNotice(notice);
  uint8_t* at = notice_buffers_->mutable_slot(slot);
  std::memcpy(at, bytes.data(), bytes.size());
  wr.opcode = RdmaOp::Opcode::kSend;
  wr.local_addr = at;
  wr.length = static_cast<uint32_t>(bytes.size());
  wr.lkey = notice_buffers_->lkey();
  wr.inline_data = bytes.size() <= inline_max_;
  ++q.notices_sent;
  ++q.notice_sends_inflight;
  --q.credits;
  q.awaiting.push_back(Awaiting{notice.tag, chunk.op});
  ++awaiting_acks_;
  chunk.op->awaiting_ack = true;
}

void VerbsChannel::Impl::OnAck(const WorkRequestId& id, const ibv_wc& wc) {
  const size_t index = id.qp;
  const size_t slot = id.slot;
  if (index >= qps_.size() || notice_buffers_ == nullptr ||
      slot / kNoticeCredits != index) {
    return;  // not one of ours: cannot happen
  }
  QpState& q = qps_[index];
  if (wc.status != IBV_WC_SUCCESS) {
    // Flushed from a QP in error, or the peer sent more than a slot holds
    // (the QP is in error now). Either way no ack comes on it any more.
    if (wc.status != IBV_WC_WR_FLUSH_ERR && !q.error) {
      ++q.errors;
      SetError(index, CompletionStatus(wc));
    }
    return;
  }
  // The peer wrote these bytes: copy them, give the slot back, then look.
  uint8_t copy[kNoticeSlotBytes];
  const size_t length = std::min<size_t>(wc.byte_len, kNoticeSlotBytes);
  std::memcpy(copy, notice_buffers_->slot(slot), length);
  if (!q.error) {
    if (absl::Status s =
            notice_buffers_->PostRecv(*q.qp, slot, AckWrId(index, slot));
        !s.ok()) {
      spdlog::warn("peer {}: {}", options_.peer, std::string(s.message()));
    }
  }
  // A QP that failed had its awaited acks abandoned (AbandonAcks): one
  // that was already received is of no use any more.
  if (q.error) return;
  absl::StatusOr<NoticeAck> ack =
      DecodeNoticeAck(absl::MakeConstSpan(copy, length));
  if (!ack.ok()) {
    spdlog::warn("peer {}: ignored a message that is not a notice ack: {}",
                 options_.peer, std::string(ack.status().message()));
    return;
  }
  // One QP acks in the order it received, and tags grow: the ack is for
  // the oldest notice, unless the peer could not answer some before it
  // (it counts those): they never will be.
  const bool known =
      std::any_of(q.awaiting.begin(), q.awaiting.end(),
                  [&](const Awaiting& a) { return a.tag == ack->tag; });
  if (!known) {
    spdlog::warn("peer {}: ignored an ack for a notice it was not sent "
                 "(tag {})",
                 options_.peer, ack->tag);
    return;
  }
  std::vector<std::shared_ptr<OpState>> unanswered;
  std::shared_ptr<OpState> op;
  while (!q.awaiting.empty()) {
    Awaiting a = std::move(q.awaiting.front());
    q.awaiting.pop_front();
    --awaiting_acks_;
    // Its receive was re-posted before the peer went on: the credit is
    // good again either way.
    ++q.credits;
    if (a.tag == ack->tag) {
      op = a.op.lock();
      break;
    }
    if (auto lost = a.op.lock()) unanswered.push_back(std::move(lost));
  }
  for (const std::shared_ptr<OpState>& lost : unanswered) {
    if (!lost->awaiting_ack) continue;
    lost->awaiting_ack = false;
    if (lost->status.ok()) {
      lost->status = absl::UnavailableError(absl::StrCat(
          "peer ", options_.peer,
          " did not acknowledge the notification of a WRITE with an "
          "immediate (it answered a later one): the data is in place, but "
          "its owner may not have been told; retry"));
    }
    MaybeFinish(lost);
  }
  if (op == nullptr || !op->awaiting_ack) return;  // finished meanwhile
  op->awaiting_ack = false;
  if (ack->result != NoticeResult::kDelivered && op->status.ok()) {
    op->status = NoticeResultStatus(ack->result, options_.peer,
                                    core::RemoteRegionLabel(*op->op.remote));
  }
  MaybeFinish(op);
}

void VerbsChannel::Impl::AbandonAcks(size_t qp_index) {
  QpState& q = qps_[qp_index];
  if (q.awaiting.empty()) return;
  std::deque<Awaiting> abandoned;
  abandoned.swap(q.awaiting);
  awaiting_acks_ -= abandoned.size();
  // Finished from a task of their own: the caller may be walking a QP's
  // WRs, which an operation's callback could change.
  loop_->Post([self = shared_from_this(), abandoned = std::move(abandoned)] {
    for (const Awaiting& a : abandoned) {
      std::shared_ptr<OpState> op = a.op.lock();
      if (op == nullptr || !op->awaiting_ack) continue;
      op->awaiting_ack = false;
      if (op->status.ok()) {
        op->status = absl::UnavailableError(absl::StrCat(
            "a QP to peer ", self->options_.peer,
            " failed before the peer acknowledged the notification of a "
            "WRITE with an immediate (", self->last_error_,
            "); the data may be in place and its owner may have been told; "
            "retry"));
      }
      if (!self->torn_down_) self->MaybeFinish(op);
    }
  });
}

}  // namespace rdmad::verbs
