#include "daemon/transport/verbs/notice_receiver.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "daemon/transport/verbs/conversions.h"
#include "daemon/transport/verbs/notice_buffers.h"
#include "daemon/transport/verbs/work_request_id.h"
#include "spdlog/spdlog.h"

namespace rdmad::verbs {
namespace {

constexpr size_t kPollBatch = 32;
// Acks one QP may hold back while its send queue is full.
constexpr size_t kMaxWaitingAcks = 4 * kNoticeCredits;

}  // namespace

void NoticeTarget::Set(const core::RegionTable* regions,
                       core::NotificationSink* sink) {
  regions_.store(regions);
  sink_.store(sink);
}

NoticeCounts NoticeTarget::counts() const {
  NoticeCounts c;
  c.delivered = delivered_.load();
  c.rejected = rejected_.load();
  c.malformed = malformed_.load();
  c.acks_dropped = acks_dropped_.load();
  return c;
}

void NoticeTarget::CountResult(NoticeResult result) {
  if (result == NoticeResult::kDelivered) {
    delivered_.fetch_add(1);
  } else {
    rejected_.fetch_add(1);
  }
}

class NoticeReceiver::Impl : public runtime::Poller,
                             public std::enable_shared_from_this<Impl> {
 public:
  Impl(NoticeReceiverOptions options, std::shared_ptr<CompletionQueue> cq)
      : options_(std::move(options)),
        caller_(CallerSockaddr(options_.caller)),
        writer_(std::make_shared<const std::string>(options_.peer)),
        loop_(options_.loop),
        cq_(std::move(cq)) {}

  ~Impl() override {
    // Teardown did not run (the loop had finished): the QPs go before the
    // buffers their receives point into.
    qps_.clear();
  }

  absl::Status Start(std::vector<std::unique_ptr<QueuePair>> qps) {
    if (qps.empty() || qps.size() > 255) {
      return absl::InvalidArgumentError(
          "a notice receiver serves 1..255 QPs");
    }
    const bool shared = options_.shared != nullptr;
    for (const auto& qp : qps) {
      if (!shared && qp->max_recv_wr() < kNoticeCredits) {
        return absl::FailedPreconditionError(absl::StrCat(
            "a verbs QP has room for ", qp->max_recv_wr(),
            " receives; notices need ", kNoticeCredits,
            ": raise QpConfig::max_recv_wr"));
      }
    }
    qps_ = std::move(qps);
    sends_.assign(qps_.size(), QpSends{});
    ack_inline_ = true;
    for (const auto& qp : qps_) {
      ack_inline_ &= qp->max_inline_data() >= kNoticeAckBytes;
    }
    // Per QP, one receive slot per credit (unless the receives are the
    // shared queue's) and one SEND slot per credit (unless acks go inline).
    recv_slots_ = shared ? 0 : qps_.size() * kNoticeCredits;
    const size_t send_slots = ack_inline_ ? 0 : qps_.size() * kNoticeCredits;
    if (recv_slots_ + send_slots > 0) {
      RDMAD_ASSIGN_OR_RETURN(buffers_,
                             NoticeBuffers::Create(cq_->device(),
                                                   recv_slots_ + send_slots));
    }
    for (size_t i = 0; i < qps_.size() && !shared; ++i) {
      for (size_t k = 0; k < kNoticeCredits; ++k) {
        const size_t slot = i * kNoticeCredits + k;
        RDMAD_RETURN_IF_ERROR(
            buffers_->PostRecv(*qps_[i], slot, RecvWrId(i, slot)));
      }
    }
    std::shared_ptr<Impl> self = shared_from_this();
    return runtime::RunOnLoop(loop_, [self]() -> absl::Status {
      RDMAD_ASSIGN_OR_RETURN(
          self->cq_watch_,
          self->loop_->Watch(self->cq_->event_fd(), EPOLLIN,
                             [raw = self.get()](uint32_t) { raw->OnCqEvent(); }));
      self->loop_->AddPoller(self.get());
      self->joined_ = true;
      RDMAD_RETURN_IF_ERROR(self->cq_->Arm());
      self->armed_ = true;
      // A notice cannot have come yet (the peer waits for our answer), but
      // a completion before the arm would raise no event.
      self->Drain();
      return absl::OkStatus();
    });
  }

  const std::vector<std::unique_ptr<QueuePair>>& qps() const { return qps_; }

  void Close() {
    std::shared_ptr<Impl> self = shared_from_this();
    if (!loop_->Post([self] { self->Teardown(); })) {
      // The loop has finished: nothing polls this receiver any more, and
      // the destructor frees what is left.
      self->torn_down_ = true;
    }
  }

  // runtime::Poller (loop thread). While armed, a completion raises an
  // event: nothing to poll. Otherwise poll, and arm once nothing came.
  bool Poll() override {
    if (torn_down_ || armed_) return false;
    if (Drain()) return true;
    if (!Arm()) return false;
    return Drain();
  }

  bool PrepareToSleep() override {
    if (torn_down_ || armed_) return false;
    if (!Arm()) return false;
    return Drain();
  }

 private:
  struct QpSends {
    uint64_t posted = 0;     // acks posted (each signaled)
    uint64_t completed = 0;  // their completions
    // Acks waiting for a send-queue slot (or a SEND slot). The peer may
    // send its next notices before our send queue saw the transport ACK of
    // the acks it already has, so acks in flight can briefly exceed its
    // credits: they wait here instead of being lost.
    std::deque<NoticeAck> waiting;
    bool dead = false;       // the QP failed: it answers nothing more
  };

  // Acks one QP may have posted and not yet completed: the send queue when
  // they go inline, else the SEND slots.
  size_t AckLimit(size_t index) const {
    return ack_inline_ ? qps_[index]->max_send_wr() : kNoticeCredits;
  }

  static uint64_t RecvWrId(size_t qp, size_t slot) {
    return WorkRequestId::Receive(qp, slot).Encode();
  }

  bool Arm() {
    if (absl::Status s = cq_->Arm(); !s.ok()) {
      spdlog::error("verbs notices from {}: {}", options_.peer,
                    std::string(s.message()));
      return false;
    }
    armed_ = true;
    return true;
  }

  void OnCqEvent() {
    if (torn_down_) return;
    if (auto events = cq_->ConsumeEvents(); !events.ok()) {
      spdlog::error("verbs notices from {}: {}", options_.peer,
                    std::string(events.status().message()));
    }
    armed_ = false;  // the event spent the arm; Poll re-arms when idle
    Drain();
  }

  // Polls the CQ until it is empty; true if it found any completion.
  bool Drain() {
    if (torn_down_) return false;
    ibv_wc wcs[kPollBatch];
    bool any = false;
    for (;;) {
      auto polled = cq_->Poll(absl::MakeSpan(wcs, kPollBatch));
      if (!polled.ok()) {
        spdlog::error("verbs notices from {}: {}", options_.peer,
                      std::string(polled.status().message()));
        break;
      }
      for (size_t i = 0; i < *polled && !torn_down_; ++i) {
        OnCompletion(wcs[i]);
      }
      any |= *polled > 0;
      if (*polled < kPollBatch || torn_down_) break;
    }
    return any;
  }

  void OnCompletion(const ibv_wc& wc) {
    const WorkRequestId id = WorkRequestId::Decode(wc.wr_id);
    if (id.receive && options_.shared != nullptr) {
      OnSharedReceived(id.slot, wc);
      return;
    }
    if (id.qp >= qps_.size()) return;  // not ours: cannot happen
    if (!id.receive) {
      OnAckSent(id.qp, wc);
    } else {
      OnReceived(id.qp, id.slot, wc);
    }
  }

  void OnAckSent(size_t index, const ibv_wc& wc) {
    QpSends& s = sends_[index];
    ++s.completed;
    if (wc.status != IBV_WC_SUCCESS) {
      MarkDead(index, CompletionStatus(wc));
      return;
    }
    while (!s.waiting.empty() && !s.dead &&
           s.posted - s.completed < AckLimit(index)) {
      const NoticeAck ack = s.waiting.front();
      s.waiting.pop_front();
      PostAck(index, ack);
    }
  }

  void OnReceiveFailed(size_t index, const ibv_wc& wc) {
    // A flush means the QP is already in error (the peer went away or a
    // pool replaced this one). Anything else broke the protocol, e.g. a
    // SEND longer than a slot: the QP is in error now.
    if (wc.status != IBV_WC_WR_FLUSH_ERR) {
      options_.target->CountMalformed();
      MarkDead(index, CompletionStatus(wc));
    }
  }

  // The QP of this pool whose number a completion names; qps_.size() when
  // none (cannot happen: the CQ is this pool's).
  size_t IndexOf(uint32_t qp_num) const {
    size_t i = 0;
    while (i < qps_.size() && qps_[i]->qpn() != qp_num) ++i;
    return i;
  }

  // A receive from the device's shared queue: the slot goes back to the
  // queue at once, whatever came, once the bytes are copied out.
  void OnSharedReceived(size_t slot, const ibv_wc& wc) {
    NoticeSharedReceives& shared = *options_.shared;
    if (slot >= shared.depth()) return;  // not a slot of it: cannot happen
    uint8_t copy[kNoticeSlotBytes];
    size_t length = 0;
    if (wc.status == IBV_WC_SUCCESS) {
      length = std::min<size_t>(wc.byte_len, kNoticeSlotBytes);
      std::memcpy(copy, shared.slot(slot), length);
    }
    if (absl::Status s = shared.Repost(slot); !s.ok()) {
      spdlog::error("verbs notices on {}: a shared receive was lost: {}",
                    shared.device_name(), std::string(s.message()));
    }
    const size_t index = IndexOf(wc.qp_num);
    if (index >= qps_.size()) return;
    if (wc.status != IBV_WC_SUCCESS) {
      OnReceiveFailed(index, wc);
      return;
    }
    OnNotice(index, copy, length);
  }

  void OnReceived(size_t index, size_t slot, const ibv_wc& wc) {
    if (wc.status != IBV_WC_SUCCESS) {
      OnReceiveFailed(index, wc);
      return;
    }
    if (slot >= recv_slots_ || slot / kNoticeCredits != index) {
      return;  // not a receive slot of this QP: cannot happen
    }
    // The peer wrote these bytes: copy them first, then give the slot back
    // to the NIC before answering, so the peer's credit is good again by
    // the time it sees the ack.
    uint8_t copy[kNoticeSlotBytes];
    const size_t length = std::min<size_t>(wc.byte_len, kNoticeSlotBytes);
    std::memcpy(copy, buffers_->slot(slot), length);
    if (absl::Status s =
            buffers_->PostRecv(*qps_[index], slot, RecvWrId(index, slot));
        !s.ok()) {
      MarkDead(index, s);
    }
    OnNotice(index, copy, length);
  }

  // A notice's bytes, copied out of its receive slot.
  void OnNotice(size_t index, const uint8_t* copy, size_t length) {
    absl::StatusOr<Notice> notice =
        DecodeNotice(absl::MakeConstSpan(copy, length));
    if (!notice.ok()) {
      options_.target->CountMalformed();
      spdlog::debug("verbs notices from {}: dropped: {}", options_.peer,
                    std::string(notice.status().message()));
      return;
    }
    const NoticeResult result = Deliver(*notice);
    options_.target->CountResult(result);
    if (result != NoticeResult::kDelivered) {
      spdlog::debug("verbs notices from {}: refused a notice for region #{} "
                    "[{}, +{}): {}",
                    options_.peer, notice->region_id, notice->offset,
                    notice->length, std::string(NoticeResultName(result)));
    }
    SendAck(index, NoticeAck{notice->tag, result});
  }

  NoticeResult Deliver(const Notice& notice) {
    const core::RegionTable* regions = options_.target->regions();
    core::NotificationSink* sink = options_.target->sink();
    if (regions == nullptr || sink == nullptr) return NoticeResult::kNotServed;
    std::shared_ptr<core::Region> region;
    const NoticeResult result =
        CheckNotice(*regions, options_.device, notice, caller_, &region);
    if (result == NoticeResult::kDelivered) {
      // Taken by the sink whatever room the owner has (it holds what does
      // not fit): the ack says delivered.
      sink->Notify(
          *region, notice.offset, notice.length, notice.immediate,
          core::NotificationWriter{.transport = core::TransportKind::kVerbs,
                                   .address = writer_});
    }
    return result;
  }

  void SendAck(size_t index, const NoticeAck& ack) {
    QpSends& s = sends_[index];
    if (s.dead) {
      options_.target->CountAckDropped();
      return;
    }
    if (!s.waiting.empty() || s.posted - s.completed >= AckLimit(index)) {
      // A peer that keeps to its credits never gets this far ahead; one
      // that does not loses acks, not our memory.
      if (s.waiting.size() >= kMaxWaitingAcks) {
        options_.target->CountAckDropped();
        return;
      }
      s.waiting.push_back(ack);
      return;
    }
    PostAck(index, ack);
  }

  void PostAck(size_t index, const NoticeAck& ack) {
    QpSends& s = sends_[index];
    const std::array<uint8_t, kNoticeAckBytes> bytes = EncodeNoticeAck(ack);
    RdmaOp op;
    op.opcode = RdmaOp::Opcode::kSend;
    // The ack's sequence is not needed: its completion only frees the slot.
    op.wr_id = WorkRequestId::Send(index, 0).Encode();
    op.length = static_cast<uint32_t>(bytes.size());
    op.signaled = true;
    if (ack_inline_) {
      // Copied into the WQE by the post: no slot to hold.
      op.local_addr = const_cast<uint8_t*>(bytes.data());
      op.inline_data = true;
    } else {
      // SEND slots follow the receive slots and are used in turn; one is
      // reused only after the ack sent from it completed (AckLimit keeps
      // fewer than kNoticeCredits in flight, and they complete in order).
      const size_t slot = recv_slots_ + index * kNoticeCredits +
                          static_cast<size_t>(s.posted % kNoticeCredits);
      std::memcpy(buffers_->mutable_slot(slot), bytes.data(), bytes.size());
      op.local_addr = buffers_->mutable_slot(slot);
      op.lkey = buffers_->lkey();
    }
    if (absl::Status st = qps_[index]->Post(absl::MakeConstSpan(&op, 1));
        !st.ok()) {
      options_.target->CountAckDropped();
      MarkDead(index, st);
      return;
    }
    ++s.posted;
  }

  void MarkDead(size_t index, const absl::Status& why) {
    QpSends& s = sends_[index];
    if (s.dead) return;
    s.dead = true;
    for (size_t i = 0; i < s.waiting.size(); ++i) {
      options_.target->CountAckDropped();
    }
    s.waiting.clear();
    spdlog::warn("verbs notices from {}: a QP stopped answering notices: {}",
                 options_.peer, std::string(why.message()));
  }

  void Teardown() {
    if (torn_down_) return;
    torn_down_ = true;
    if (cq_watch_ != 0) loop_->Unwatch(cq_watch_);
    cq_watch_ = 0;
    if (joined_) loop_->RemovePoller(this);
    if (options_.shared != nullptr && options_.monitor != nullptr &&
        !qps_.empty()) {
      Retire();
      return;
    }
    qps_.clear();
    ReclaimSharedReceives();
  }

  // Moves every QP to the error state and destroys them once each has
  // reported its last WQE (or at kLastWqeWait): a QP destroyed while a
  // notice was arriving would take the SRQ receive it was filling with it.
  void Retire() {
    std::shared_ptr<Impl> self = shared_from_this();
    for (const auto& qp : qps_) {
      const uint32_t qpn = qp->qpn();
      options_.monitor->WatchLastWqe(
          options_.device, qpn, [weak = std::weak_ptr<Impl>(self), qpn] {
            if (auto impl = weak.lock()) {
              impl->loop_->Post([impl, qpn] { impl->LastWqeReached(qpn); });
            }
          });
      if (absl::Status s = qp->ModifyToError(); !s.ok()) {
        // No event will come for it; the deadline ends the wait.
        spdlog::warn("verbs notices from {}: {}", options_.peer,
                     std::string(s.message()));
      }
      retiring_.push_back(qpn);
    }
    retire_timer_ = loop_->RunAt(absl::Now() + kLastWqeWait,
                                 [self] { self->FinishRetire(); });
  }

  void LastWqeReached(uint32_t qpn) {
    std::erase(retiring_, qpn);
    if (retiring_.empty()) FinishRetire();
  }

  void FinishRetire() {
    if (retired_) return;
    retired_ = true;
    loop_->CancelTimer(retire_timer_);
    for (uint32_t qpn : retiring_) {
      options_.monitor->UnwatchLastWqe(options_.device, qpn);
    }
    if (!retiring_.empty()) {
      spdlog::warn("verbs notices from {}: {} QP(s) destroyed without their "
                   "last WQE reported after {}",
                   options_.peer, retiring_.size(),
                   absl::FormatDuration(kLastWqeWait));
    }
    retiring_.clear();
    // What the QPs took from the queue is in the CQ now: give it back,
    // then destroy them (and take back anything that came meanwhile).
    ReclaimSharedReceives();
    qps_.clear();
    ReclaimSharedReceives();
  }

  // The QPs are gone: receives they took from the shared queue whose
  // completions are still in the CQ go back to it, so the queue does not
  // shrink as pools come and go. (A receive a message was still filling
  // when its QP was destroyed completes nowhere and is not given back.)
  void ReclaimSharedReceives() {
    if (options_.shared == nullptr) return;
    ibv_wc wcs[kPollBatch];
    for (;;) {
      auto polled = cq_->Poll(absl::MakeSpan(wcs, kPollBatch));
      if (!polled.ok() || *polled == 0) return;
      for (size_t i = 0; i < *polled; ++i) {
        const WorkRequestId id = WorkRequestId::Decode(wcs[i].wr_id);
        if (id.receive && id.slot < options_.shared->depth()) {
          options_.shared->Repost(id.slot).IgnoreError();
        }
      }
    }
  }

  const NoticeReceiverOptions options_;
  const std::optional<sockaddr_storage> caller_;  // options_.caller parsed
  // The caller's Peer address as its notifications name their writer (one
  // copy for all of them).
  const std::shared_ptr<const std::string> writer_;
  runtime::EventLoop* const loop_;  // Not owned.
  // Parents first: the CQ outlives the buffers and the QPs; the buffers
  // outlive the QPs whose receives point into them.
  const std::shared_ptr<CompletionQueue> cq_;
  std::unique_ptr<NoticeBuffers> buffers_;
  std::vector<std::unique_ptr<QueuePair>> qps_;

  // Loop thread only (set up in Start, before the receiver is shared).
  std::vector<QpSends> sends_;
  size_t recv_slots_ = 0;  // receive slots in buffers_ (before SEND slots)
  bool ack_inline_ = false;  // every QP takes an ack inline
  uint64_t cq_watch_ = 0;
  bool armed_ = false;
  bool joined_ = false;
  bool torn_down_ = false;
  // Retire: the QPs whose last WQE is awaited, and the deadline's timer.
  std::vector<uint32_t> retiring_;
  uint64_t retire_timer_ = 0;
  bool retired_ = false;
};

absl::StatusOr<std::unique_ptr<NoticeReceiver>> NoticeReceiver::Start(
    NoticeReceiverOptions options, std::shared_ptr<CompletionQueue> cq,
    std::vector<std::unique_ptr<QueuePair>> qps) {
  if (options.loop == nullptr || options.target == nullptr || cq == nullptr) {
    return absl::InvalidArgumentError(
        "a notice receiver needs a loop, a target and a CQ");
  }
  auto impl = std::make_shared<Impl>(std::move(options), std::move(cq));
  if (absl::Status s = impl->Start(std::move(qps)); !s.ok()) {
    impl->Close();
    return s;
  }
  return std::unique_ptr<NoticeReceiver>(new NoticeReceiver(std::move(impl)));
}

NoticeReceiver::NoticeReceiver(std::shared_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

NoticeReceiver::~NoticeReceiver() { impl_->Close(); }

const std::vector<std::unique_ptr<QueuePair>>& NoticeReceiver::qps() const {
  return impl_->qps();
}

}  // namespace rdmad::verbs
