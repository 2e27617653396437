#include "daemon/transport/verbs/notice_buffers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/transport/verbs/conversions.h"

namespace rdmad::verbs {

NoticeBuffers::NoticeBuffers(size_t count, std::unique_ptr<uint8_t[]> memory)
    : count_(count), memory_(std::move(memory)) {}

absl::StatusOr<std::unique_ptr<NoticeBuffers>> NoticeBuffers::Create(
    std::shared_ptr<Device> device, size_t count) {
  if (count == 0) {
    return absl::InvalidArgumentError("NoticeBuffers needs at least one slot");
  }
  const size_t bytes = count * kNoticeSlotBytes;
  // Zeroed, so a slot never shows stale heap contents.
  auto memory = std::make_unique<uint8_t[]>(bytes);
  std::unique_ptr<NoticeBuffers> buffers(
      new NoticeBuffers(count, std::move(memory)));
  RDMAD_ASSIGN_OR_RETURN(
      buffers->mr_,
      MemoryRegion::Register(std::move(device), buffers->memory_.get(), bytes,
                             MrAccessFlags(core::RemoteAccess::kNone)));
  return buffers;
}

absl::Status NoticeBuffers::PostRecv(QueuePair& qp, size_t index,
                                     uint64_t wr_id) {
  if (index >= count_) {
    return absl::InvalidArgumentError(
        absl::StrCat("notice slot ", index, " of ", count_));
  }
  return qp.PostRecv(wr_id, memory_.get() + index * kNoticeSlotBytes,
                     kNoticeSlotBytes, mr_->lkey());
}

}  // namespace rdmad::verbs
