#include "daemon/transport/verbs/notice_srq.h"

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "daemon/transport/verbs/work_request_id.h"

namespace rdmad::verbs {

NoticeSharedReceives::NoticeSharedReceives(std::shared_ptr<Device> device,
                                           uint32_t depth)
    : device_(std::move(device)), depth_(depth) {}

absl::StatusOr<std::shared_ptr<NoticeSharedReceives>>
NoticeSharedReceives::Create(std::shared_ptr<Device> device, uint32_t depth) {
  const ibv_device_attr& attr = device->attributes();
  if (depth == 0) {
    return absl::InvalidArgumentError("a shared receive queue needs depth > 0");
  }
  if (attr.max_srq <= 0 ||
      static_cast<uint64_t>(std::max(attr.max_srq_wr, 0)) < depth) {
    return absl::FailedPreconditionError(absl::StrCat(
        device->name(), " offers ", attr.max_srq, " shared receive queues of ",
        attr.max_srq_wr, " receives; notices need one of ", depth,
        ": notices are received per QP instead"));
  }
  std::shared_ptr<NoticeSharedReceives> shared(
      new NoticeSharedReceives(device, depth));
  RDMAD_ASSIGN_OR_RETURN(shared->buffers_,
                         NoticeBuffers::Create(device, depth));
  ibv_srq_init_attr init{};
  init.attr.max_wr = depth;
  init.attr.max_sge = 1;
  shared->srq_.reset(ibv_create_srq(device->pd(), &init));
  if (shared->srq_ == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("ibv_create_srq(%s, %u receives): stay within "
                               "the device's max_srq_wr (%d)",
                               device->name(), depth, attr.max_srq_wr));
  }
  for (size_t i = 0; i < depth; ++i) {
    RDMAD_RETURN_IF_ERROR(shared->Post(i));
  }
  return shared;
}

absl::Status NoticeSharedReceives::Post(size_t index) {
  if (index >= depth_) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared notice slot ", index, " of ", depth_));
  }
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(buffers_->slot(index));
  sge.length = kNoticeSlotBytes;
  sge.lkey = buffers_->lkey();
  ibv_recv_wr wr{};
  wr.wr_id = WorkRequestId::Receive(0, index).Encode();
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_srq_recv(srq_.get(), &wr, &bad); rc != 0) {
    return absl::ErrnoToStatus(
        rc, absl::StrFormat("ibv_post_srq_recv(%s, slot %u)", device_->name(),
                            index));
  }
  posted_.fetch_add(1);
  return absl::OkStatus();
}

absl::Status NoticeSharedReceives::Repost(size_t index) {
  // Taken by a message: out of the queue until posted again.
  posted_.fetch_sub(1);
  reposts_.fetch_add(1);
  return Post(index);
}

}  // namespace rdmad::verbs
