// NoticeSharedReceives: the receives for notices of every peer's QPs on one
// device, from one shared receive queue (ibv_srq), so that what a daemon
// posts for notices does not grow with the number of peers.
//
// A responder used to keep kNoticeCredits receives (and their slots and an
// MR) per QP: 4 QPs x 16 x 64 B for each peer that connects, whether it
// sends notices or not. The QPs a VerbsAcceptor creates now take their
// receives from the device's shared queue instead: `depth` receives of
// kNoticeSlotBytes, posted once, each given back (Repost) by the receiver
// that took its completion as soon as it has copied the notice out. A
// completion names its QP by qp_num (the receiver maps it to its pool's QP)
// and its slot by wr_id (WorkRequestId::Receive(0, slot)).
//
// Flow control: an initiator keeps to kNoticeCredits notices per QP, but the
// queue is shared, so many peers sending at once could find it empty; the
// sender's NIC then retries after an RNR NAK (QpConfig::rnr_retry). Receives
// go back to the queue on the receivers' loops without waiting for
// anything, so the queue runs empty only when those loops fall `depth`
// notices behind.
//
// Lifetime: every QP created with srq() must be destroyed before this (the
// receivers that own them hold a shared_ptr to it).
//
// Example:
//   RDMAD_ASSIGN_OR_RETURN(auto shared,
//                          NoticeSharedReceives::Create(device, 1024));
//   config.srq = shared->srq();   // the QPs of accepted pools
//   ... a receive completion wc: the notice is in shared->slot(slot) ...
//   shared->Repost(WorkRequestId::Decode(wc.wr_id).slot);
//
// Thread-safety: thread-safe (ibv_post_srq_recv may be called from any
// thread; the counters are atomic).
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_NOTICE_SRQ_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_NOTICE_SRQ_H_

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/handles.h"
#include "daemon/transport/verbs/notice_buffers.h"

namespace rdmad::verbs {

// Receives in each device's shared queue: 64 KiB of slots per device, more
// notices than 16 busy peers' whole credits (4 QPs x 16) at once.
inline constexpr uint32_t kNoticeSharedReceives = 1024;

class NoticeSharedReceives {
 public:
  // Creates the SRQ on `device`'s PD and posts `depth` receives.
  // FAILED_PRECONDITION when the device has no SRQs (max_srq 0) or allows
  // fewer receives per SRQ than `depth`; the errors of ibv_create_srq,
  // ibv_reg_mr and ibv_post_srq_recv otherwise.
  static absl::StatusOr<std::shared_ptr<NoticeSharedReceives>> Create(
      std::shared_ptr<Device> device, uint32_t depth);

  NoticeSharedReceives(const NoticeSharedReceives&) = delete;
  NoticeSharedReceives& operator=(const NoticeSharedReceives&) = delete;

  // The queue, for ibv_create_qp. Valid while this lives.
  ibv_srq* srq() const { return srq_.get(); }
  const std::string& device_name() const { return device_->name(); }
  uint32_t depth() const { return depth_; }

  // The bytes received into `slot` (< depth()): valid until Repost(slot).
  const uint8_t* slot(size_t index) const { return buffers_->slot(index); }

  // Posts the receive of `slot` again, once its completion was taken.
  absl::Status Repost(size_t index);

  // Receives in the queue now: depth() less those taken by a message and
  // not yet given back.
  uint64_t posted() const { return posted_.load(); }
  // How many receive completions gave their slot back in all.
  uint64_t reposts() const { return reposts_.load(); }

 private:
  NoticeSharedReceives(std::shared_ptr<Device> device, uint32_t depth);
  absl::Status Post(size_t index);

  const std::shared_ptr<Device> device_;
  const uint32_t depth_;
  // Declared before the SRQ: the receives posted into the buffers go with
  // the SRQ, before the memory is deregistered.
  std::unique_ptr<NoticeBuffers> buffers_;
  SrqHandle srq_;
  std::atomic<uint64_t> posted_{0};
  std::atomic<uint64_t> reposts_{0};
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_NOTICE_SRQ_H_
