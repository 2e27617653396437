// VerbsChannel's QPs: those it starts with, and those a pool sized by
// traffic adds while it runs (qp_growth.h says when).
#include <sys/epoll.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/runtime/coarse_clock.h"
#include "daemon/transport/verbs/verbs_channel_impl.h"
#include "spdlog/spdlog.h"

namespace rdmad::verbs {

absl::Status VerbsChannel::Impl::Start(
    std::vector<std::unique_ptr<QueuePair>> qps,
    std::vector<uint32_t> remote_qpns) {
  if (qps.empty()) {
    return absl::InvalidArgumentError("a verbs channel needs at least one QP");
  }
  if (qps.size() > 255) {
    return absl::InvalidArgumentError("a verbs channel takes at most 255 QPs");
  }
  slot_qps_ = qps.size();
  if (options_.grow) {
    slot_qps_ = std::clamp<size_t>(options_.growth.max_qps, slot_qps_, 255);
  }
  for (size_t i = 0; i < qps.size(); ++i) {
    TakeQp(std::move(qps[i]), i < remote_qpns.size() ? remote_qpns[i] : 0);
  }
  RDMAD_RETURN_IF_ERROR(StartNotices());
  std::shared_ptr<Impl> self = shared_from_this();
  return runtime::RunOnLoop(loop_, [self]() -> absl::Status {
    RDMAD_ASSIGN_OR_RETURN(
        self->cq_watch_,
        self->loop_->Watch(self->cq_->event_fd(), EPOLLIN,
                           [raw = self.get()](uint32_t) { raw->OnCqEvent(); }));
    self->loop_->AddPoller(self.get());
    RDMAD_RETURN_IF_ERROR(self->cq_->Arm());
    self->armed_ = true;
    return absl::OkStatus();
  });
}

void VerbsChannel::Impl::TakeQp(std::unique_ptr<QueuePair> qp,
                                uint32_t remote_qpn) {
  QpState q;
  q.slots = qp->max_send_wr();
  q.remote_qpn = remote_qpn;
  chunk_bytes_ = std::min<uint64_t>(chunk_bytes_, qp->max_message_size());
  read_chunk_bytes_ = std::min(read_chunk_bytes_, chunk_bytes_);
  inline_max_ = std::min(inline_max_, qp->max_inline_data());
  q.qp = std::move(qp);
  qps_.push_back(std::move(q));
}

void VerbsChannel::Impl::MaybeGrow() {
  if (!options_.grow || broken_.load() || torn_down_) return;
  uint32_t open = 0;
  for (const QpState& q : qps_) open += !q.error && q.qp != nullptr;
  // Only chunks any QP could take count: a backlog of notices waits for
  // its one QP's credits, which more QPs would not give it.
  uint32_t add = growth_.Want(runtime::CoarseNow(), open, !pending_.empty());
  if (add == 0) return;
  add = static_cast<uint32_t>(std::min<size_t>(add, slot_qps_ - qps_.size()));
  if (add == 0) {
    growth_.Done(runtime::CoarseNow(), false);
    return;
  }
  spdlog::info("peer {}: every QP's send queue is full; adding {} QP(s) to "
               "the {} on {}",
               options_.peer, add, qps_.size(), options_.local_device);
  std::weak_ptr<Impl> weak = weak_from_this();
  options_.grow(add, static_cast<uint32_t>(qps_.size() + add), cq_,
                [weak, loop = loop_](absl::StatusOr<GrownQps> grown) mutable {
                  // QPs that find no channel are destroyed here: nothing
                  // was posted on them.
                  if (weak.expired()) return;
                  loop->Post([weak, grown = std::move(grown)]() mutable {
                    if (auto self = weak.lock()) self->AddQps(std::move(grown));
                  });
                });
}

void VerbsChannel::Impl::AddQps(absl::StatusOr<GrownQps> grown) {
  const absl::Time now = runtime::CoarseNow();
  if (!grown.ok()) {
    growth_.Done(now, false);
    spdlog::warn("peer {}: could not add QPs ({}); going on with {}, asking "
                 "again later",
                 options_.peer, std::string(grown.status().message()),
                 qps_.size());
    return;
  }
  if (torn_down_ || broken_.load() ||
      qps_.size() + grown->qps.size() > slot_qps_) {
    growth_.Done(now, false);
    return;  // the QPs go with `grown`
  }
  for (size_t i = 0; i < grown->qps.size(); ++i) {
    TakeQp(std::move(grown->qps[i]), i < grown->remote_qpns.size()
                                         ? grown->remote_qpns[i]
                                         : 0);
    if (absl::Status s = PostAckReceives(qps_.size() - 1); !s.ok()) {
      // Its acks could not arrive: take it out of service at once.
      SetError(qps_.size() - 1, s);
      growth_.Done(now, false);
      return;
    }
  }
  growth_.Done(now, true);
  spdlog::info("peer {}: {} QPs on {}", options_.peer, qps_.size(),
               options_.local_device);
  Pump();
}

}  // namespace rdmad::verbs
