// NoticeBuffers: a small registered array of fixed-size message slots that
// receives are posted into.
//
// A WRITE with an immediate is announced to the peer with a SEND (a notice)
// that the peer answers with a SEND (an ack); see verbs_notice.h. Each side
// keeps a few receives posted per QP for those messages, each into one slot
// of a NoticeBuffers. A slot is kNoticeSlotBytes: every message of the
// protocol fits, and a longer SEND fails on the receive side (the sender
// broke the protocol) instead of overrunning anything.
//
// Example:
//   RDMAD_ASSIGN_OR_RETURN(auto buffers, NoticeBuffers::Create(device, 16));
//   RDMAD_RETURN_IF_ERROR(buffers->PostRecv(*qp, 3, wr_id));
//   ... a receive completion for wr_id: the message is in buffers->slot(3) ...
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_NOTICE_BUFFERS_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_NOTICE_BUFFERS_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/queue_pair.h"
#include "daemon/transport/verbs/registrar.h"

namespace rdmad::verbs {

// Bytes of one slot: room for any notice or ack (verbs_notice.h).
inline constexpr uint32_t kNoticeSlotBytes = 64;

// Owns the memory of `count` slots and its MR (local write only: nothing
// remote can READ or WRITE it; it is filled only by the receives posted
// into it).
//
// Slots serve receives (filled by the NIC) and SENDs (filled by the owner,
// then read by the NIC until the SEND completes).
//
// Thread-safety: PostRecv may be called from any thread; a slot belongs to
// whoever posted a receive or a SEND from it until that completes.
class NoticeBuffers {
 public:
  // InvalidArgument for 0 slots; the errors of ibv_reg_mr otherwise.
  static absl::StatusOr<std::unique_ptr<NoticeBuffers>> Create(
      std::shared_ptr<Device> device, size_t count);

  NoticeBuffers(const NoticeBuffers&) = delete;
  NoticeBuffers& operator=(const NoticeBuffers&) = delete;

  size_t count() const { return count_; }
  // The bytes of slot `index` (< count()).
  const uint8_t* slot(size_t index) const {
    return memory_.get() + index * kNoticeSlotBytes;
  }
  uint8_t* mutable_slot(size_t index) {
    return memory_.get() + index * kNoticeSlotBytes;
  }
  // The MR's lkey, for SENDs from a slot.
  uint32_t lkey() const { return mr_->lkey(); }

  // Posts a receive of up to kNoticeSlotBytes into slot `index` on `qp`.
  absl::Status PostRecv(QueuePair& qp, size_t index, uint64_t wr_id);

 private:
  NoticeBuffers(size_t count, std::unique_ptr<uint8_t[]> memory);

  const size_t count_;
  // Declared before the MR, so the MR is deregistered before the memory
  // is freed.
  std::unique_ptr<uint8_t[]> memory_;
  std::unique_ptr<MemoryRegion> mr_;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_NOTICE_BUFFERS_H_
