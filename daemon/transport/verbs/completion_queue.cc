#include "daemon/transport/verbs/completion_queue.h"

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/transport/verbs/conversions.h"

namespace rdmad::verbs {

CompletionQueue::CompletionQueue(std::shared_ptr<Device> device,
                                 CompChannelHandle channel, CqHandle cq)
    : device_(std::move(device)),
      channel_(std::move(channel)),
      cq_(std::move(cq)) {}

CompletionQueue::~CompletionQueue() {
  if (unacked_events_ > 0) ibv_ack_cq_events(cq_.get(), unacked_events_);
}

absl::StatusOr<std::shared_ptr<CompletionQueue>> CompletionQueue::Create(
    std::shared_ptr<Device> device, int min_entries) {
  const int max_cqe = device->attributes().max_cqe;
  if (min_entries < 1 || min_entries > max_cqe) {
    return absl::InvalidArgumentError(
        absl::StrCat("a CQ of ", min_entries, " entries is not possible on ",
                     device->name(), ": choose 1..", max_cqe));
  }
  CompChannelHandle channel(ibv_create_comp_channel(device->context()));
  if (channel == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("ibv_create_comp_channel(", device->name(), ")"));
  }
  // Non-blocking, so that reading events never stalls a poller that was
  // woken for a CQ whose event another read already took.
  const int flags = fcntl(channel->fd, F_GETFL);
  if (flags < 0 || fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return absl::ErrnoToStatus(
        errno, "fcntl(O_NONBLOCK) on the completion channel fd");
  }
  CqHandle cq(ibv_create_cq(device->context(), min_entries,
                            /*cq_context=*/nullptr, channel.get(),
                            /*comp_vector=*/0));
  if (cq == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("ibv_create_cq(", device->name(), ", ", min_entries,
                            " entries): the device may be out "
                            "of CQs (max_cq ",
                            device->attributes().max_cq, ") or memory"));
  }
  return std::shared_ptr<CompletionQueue>(new CompletionQueue(
      std::move(device), std::move(channel), std::move(cq)));
}

absl::StatusOr<bool> CqNeedsResize(int capacity, int min_entries, int max_cqe,
                                   absl::string_view device) {
  if (min_entries <= capacity) return false;
  if (min_entries > max_cqe) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a CQ of ", min_entries, " entries is not possible on ",
                     device, " (max_cqe ", max_cqe, ")"));
  }
  return true;
}

absl::Status CompletionQueue::Grow(int min_entries) {
  RDMAD_ASSIGN_OR_RETURN(
      const bool resize,
      CqNeedsResize(cq_->cqe, min_entries, device_->attributes().max_cqe,
                    device_->name()));
  if (!resize) return absl::OkStatus();
  // ibv_resize_cq returns the errno value.
  if (const int rc = ibv_resize_cq(cq_.get(), min_entries); rc != 0) {
    return absl::ErrnoToStatus(
        rc, absl::StrCat("ibv_resize_cq(", device_->name(), ", ", min_entries,
                         " entries)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> CompletionQueue::Poll(absl::Span<ibv_wc> out) {
  if (out.empty()) return 0;
  const int n =
      ibv_poll_cq(cq_.get(), static_cast<int>(out.size()), out.data());
  if (n < 0) {
    // ibv_poll_cq reports failure only as a negative count; providers
    // return -errno or -1.
    return absl::InternalError(absl::StrCat(
        "ibv_poll_cq on ", device_->name(), " failed (", n,
        "): the CQ is unusable, most likely overrun; recreate it with more "
        "entries than outstanding work requests"));
  }
  return static_cast<size_t>(n);
}

absl::Status CompletionQueue::Arm() {
  if (int rc = ibv_req_notify_cq(cq_.get(), /*solicited_only=*/0); rc != 0) {
    return absl::ErrnoToStatus(
        rc, absl::StrCat("ibv_req_notify_cq(", device_->name(), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> CompletionQueue::ConsumeEvents() {
  int consumed = 0;
  for (;;) {
    ibv_cq* event_cq = nullptr;
    void* event_context = nullptr;
    if (ibv_get_cq_event(channel_.get(), &event_cq, &event_context) != 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return absl::ErrnoToStatus(errno, "ibv_get_cq_event");
    }
    ++consumed;
    ++unacked_events_;
  }
  if (unacked_events_ >= kAckBatch) {
    ibv_ack_cq_events(cq_.get(), unacked_events_);
    unacked_events_ = 0;
  }
  return consumed;
}

absl::StatusOr<size_t> CompletionQueue::Wait(absl::Span<ibv_wc> out,
                                             absl::Time deadline,
                                             absl::Duration spin) {
  if (out.empty()) {
    return absl::InvalidArgumentError(
        "CompletionQueue::Wait needs room for at least one completion");
  }
  const absl::Time start = absl::Now();
  const absl::Time spin_end = std::min(start + spin, deadline);
  do {
    RDMAD_ASSIGN_OR_RETURN(size_t n, Poll(out));
    if (n > 0) return n;
  } while (absl::Now() < spin_end);

  for (;;) {
    RDMAD_RETURN_IF_ERROR(Arm());
    // A completion that arrived between the last poll and the arm raised no
    // event; poll again or it would wait for the deadline.
    RDMAD_ASSIGN_OR_RETURN(size_t n, Poll(out));
    if (n > 0) return n;

    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no completion on a CQ of ", device_->name(), " within ",
          absl::FormatDuration(now - start),
          ": the peer QP may be unreachable or not connected (a lost RC "
          "request fails only after timeout x retry_cnt), or the work "
          "request was posted without IBV_SEND_SIGNALED"));
    }
    pollfd fd{event_fd(), POLLIN, 0};
    timespec timeout{};
    timespec* timeout_ptr = nullptr;
    if (deadline != absl::InfiniteFuture()) {
      timeout = absl::ToTimespec(deadline - now);
      timeout_ptr = &timeout;
    }
    const int rc = ppoll(&fd, 1, timeout_ptr, /*sigmask=*/nullptr);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, "poll on the completion channel fd");
    }
    if (rc > 0) {
      RDMAD_RETURN_IF_ERROR(ConsumeEvents().status());
    }
  }
}

absl::Status CompletionQueue::WaitOne(absl::Time deadline, ibv_wc* wc) {
  ibv_wc local{};
  RDMAD_ASSIGN_OR_RETURN(size_t n, Wait(absl::MakeSpan(&local, 1), deadline));
  (void)n;  // Wait returns at least one, and the span holds exactly one.
  if (wc != nullptr) *wc = local;
  return CompletionStatus(local);
}

}  // namespace rdmad::verbs
