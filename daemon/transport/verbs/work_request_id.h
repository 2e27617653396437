// The wr_id of every work request rdmad posts, as a typed value: the verbs
// data channel (VerbsChannel: WRITE/READ/notice SEND, ack receives) and the
// notice receiver (notice receives, ack SENDs) both name a completion's QP
// and its sequence or buffer slot with it.
//
//   63        56 55 54                          32 31                 0
//   +-----------+--+------------------------------+--------------------+
//   | QP index  |R | send: sequence on that QP, mod 2^55               |
//   |           |  | receive: 0                   | buffer slot        |
//   +-----------+--+------------------------------+--------------------+
//   R: set on receives, clear on sends.
//
// The QP index is the QP's position in its pool (fewer than 256 QPs per
// pool). A completion's wr_id is what this daemon posted, so Decode trusts
// the layout; callers still check the index against their pool.
//
// Example:
//   wr.wr_id = WorkRequestId::Send(qp_index, seq).Encode();
//   ...
//   const WorkRequestId id = WorkRequestId::Decode(wc.wr_id);
//   if (id.receive) OnAck(id.qp, id.slot); else OnSent(id.qp, id.sequence);
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_WORK_REQUEST_ID_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_WORK_REQUEST_ID_H_

#include <cstddef>
#include <cstdint>

namespace rdmad::verbs {

struct WorkRequestId {
  static constexpr int kQpShift = 56;
  static constexpr uint64_t kReceiveBit = uint64_t{1} << 55;
  // A send's sequence is kept to the bits below the receive bit.
  static constexpr uint64_t kSequenceMask = kReceiveBit - 1;
  static constexpr uint64_t kSlotMask = (uint64_t{1} << 32) - 1;

  size_t qp = 0;          // index of the QP in its pool
  bool receive = false;   // a receive (slot), else a send (sequence)
  uint64_t sequence = 0;  // sends: position on the QP, mod 2^55
  uint32_t slot = 0;      // receives: the buffer slot it fills

  static constexpr WorkRequestId Send(size_t qp, uint64_t sequence) {
    return {.qp = qp, .receive = false, .sequence = sequence & kSequenceMask};
  }
  static constexpr WorkRequestId Receive(size_t qp, size_t slot) {
    return {.qp = qp, .receive = true, .slot = static_cast<uint32_t>(slot)};
  }

  constexpr uint64_t Encode() const {
    const uint64_t low =
        receive ? (kReceiveBit | slot) : (sequence & kSequenceMask);
    return (uint64_t{qp} << kQpShift) | low;
  }

  static constexpr WorkRequestId Decode(uint64_t wr_id) {
    const size_t qp = static_cast<size_t>(wr_id >> kQpShift);
    if ((wr_id & kReceiveBit) != 0) {
      return Receive(qp, static_cast<size_t>(wr_id & kSlotMask));
    }
    return Send(qp, wr_id & kSequenceMask);
  }
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_WORK_REQUEST_ID_H_
