// Notices: how a WRITE with an immediate reaches the owner of the target
// region over verbs.
//
// The completion of an RDMA WRITE_WITH_IMM on the responder carries the
// 32-bit immediate and the length, but not the address, so it cannot name
// the region and offset the data went to. rdmad therefore announces the
// WRITE itself: the initiator posts, on the same RC QP and right behind the
// WRITE's work requests, a SEND of a notice {region id, rkey, offset,
// length, immediate, tag}. RC executes a QP's requests in order, so when
// the notice is received the data is in place. The responder checks the
// notice (CheckNotice), hands it to the region's owner
// (core::NotificationSink, which tells the owner at once or holds the
// notification until it has room) and answers with an ack {tag, result} on
// the same QP; the initiator's operation completes when its WRITE and its
// notice completed and the ack arrived: only after the sink took the
// notification, or with the reason the notice was refused
// (NoticeResultStatus).
//
// Who wrote: the notice does not say. The responder's QPs were made for
// one caller by its Peer.Connect, which named the caller's Peer address
// (checked there); the NoticeReceiver of those QPs names that address as
// the writer. Bound to the handshake, it cannot differ from one notice to
// the next, and the notice format stays as it was.
//
// Flow control: an initiator never has more than kNoticeCredits notices
// awaiting their ack on one QP and keeps kNoticeCredits receives posted per
// QP for the acks. The responder takes its receives from the device's
// shared receive queue (notice_srq.h; kNoticeCredits per QP where the
// device has none) and re-posts each before it acks, so a notice meets no
// receive (RNR, and the sender's NIC retries) only while the responder's
// loops are kNoticeSharedReceives notices behind.
//
// A notice is untrusted input from another host: it is copied out of the
// receive buffer, decoded from fixed little-endian fields, and checked
// against the current export of the region exactly as the TCP data server
// checks a frame (region exported, key of the current export, write
// access, range inside). A notice that passes could only have been sent by
// someone holding the region's rkey with write access, who could write the
// bytes as well. A sender the export's access list does not admit (by the
// address its Peer.Connect came from, as TCP data connections are checked)
// is refused too: the NIC let its bytes land, which no software can stop
// for an rkey, but the owner is not told.
//
// Wire format (little-endian, fixed size):
//   notice (48 bytes): u32 magic "RDNT" | u16 version 1 | u16 kind 1 |
//     u64 tag | u64 region_id | u64 offset | u64 length | u32 rkey |
//     u32 immediate
//   ack (24 bytes):    u32 magic | u16 version 1 | u16 kind 2 | u64 tag |
//     u32 result (NoticeResult) | u32 zero
//
// Example (initiator):
//   std::array<uint8_t, kNoticeBytes> bytes = EncodeNotice(notice);
//   ... post a SEND of `bytes`; later, in the receive of the ack ...
//   RDMAD_ASSIGN_OR_RETURN(NoticeAck ack, DecodeNoticeAck(received));
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_NOTICE_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_NOTICE_H_

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "daemon/core/region.h"
#include "daemon/core/region_table.h"

namespace rdmad::verbs {

inline constexpr uint32_t kNoticeMagic = 0x544e4452;  // "RDNT" little-endian
inline constexpr uint16_t kNoticeVersion = 1;
inline constexpr size_t kNoticeBytes = 48;
inline constexpr size_t kNoticeAckBytes = 24;
// Notices awaiting an ack per QP, and receives kept posted per QP where
// they are not shared. QpConfig::max_recv_wr must be at least this.
inline constexpr uint32_t kNoticeCredits = 16;

// What the initiator announces: [offset, offset+length) of region
// `region_id` was written under `rkey`, with `immediate`. `tag` is the
// initiator's, echoed in the ack.
struct Notice {
  uint64_t tag = 0;
  uint64_t region_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
  uint32_t immediate = 0;
};

// The responder's verdict on a notice. Values are on the wire: never
// renumber.
enum class NoticeResult : uint32_t {
  kDelivered = 0,    // handed to the region's owner
  kNotExported = 1,  // no region by that id is exported (freed, revoked)
  kKeyMismatch = 2,  // the rkey is not the current export's
  kOutOfRange = 3,   // the range is not inside the region (or is empty)
  kReadOnly = 4,     // the export grants no write access
  kNotServed = 5,    // the responder has nobody to tell (not set up yet)
  kNotTold = 6,      // owner's queue full (an rdmad without backlogs)
  kNotAdmitted = 7,  // the export's access list does not admit the sender
};
inline constexpr uint32_t kMaxNoticeResult = 7;

struct NoticeAck {
  uint64_t tag = 0;
  NoticeResult result = NoticeResult::kDelivered;
};

std::array<uint8_t, kNoticeBytes> EncodeNotice(const Notice& notice);
std::array<uint8_t, kNoticeAckBytes> EncodeNoticeAck(const NoticeAck& ack);

// Decode exactly one message. DATA_LOSS, saying what is wrong, for a wrong
// size, magic, version or kind (or an unknown result in an ack); nothing
// else is interpreted.
absl::StatusOr<Notice> DecodeNotice(absl::Span<const uint8_t> bytes);
absl::StatusOr<NoticeAck> DecodeNoticeAck(absl::Span<const uint8_t> bytes);

// Checks a decoded notice against the current export of its region, with
// the rkey of the export registration on `device` (the device the notice
// arrived on), and against the export's access list for `caller`: the
// address the Peer.Connect that made the notice's QP came from, checked as
// a TCP data connection's address is (core::Region::AdmitsDataPeer); when
// unknown (nullopt), only an export without a list admits it. On
// kDelivered, `region` (if not null) receives the region.
NoticeResult CheckNotice(const core::RegionTable& regions,
                         absl::string_view device, const Notice& notice,
                         const std::optional<sockaddr_storage>& caller,
                         std::shared_ptr<core::Region>* region);

// `ip` ("10.0.0.2", "fd00::1") as a sockaddr for CheckNotice; nullopt when
// it is empty or not an IP address.
std::optional<sockaddr_storage> CallerSockaddr(absl::string_view ip);

// "delivered", "not exported", ... for logs.
absl::string_view NoticeResultName(NoticeResult result);

// The initiator's status for an ack's result: OK for kDelivered; else the
// code the TCP transport gives for the same refusal (NOT_FOUND,
// PERMISSION_DENIED, OUT_OF_RANGE, UNAVAILABLE) with a message naming the
// peer and `region_label` and saying what to do. The data itself was
// written (the NIC accepted the WRITE); only the notification was refused.
absl::Status NoticeResultStatus(NoticeResult result, absl::string_view peer,
                                absl::string_view region_label);

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_NOTICE_H_
