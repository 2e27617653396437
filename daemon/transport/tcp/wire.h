// The frames of rdmad's TCP data channel, and their codec.
//
// The channel is a plain TCP connection from the connecting daemon (client)
// to the data listener of the remote daemon (server). The client sends
// requests; the server answers each with one reply. Many requests may be in
// flight on one connection, and replies may come back in any order: the
// request id pairs them up.
//
// Every integer is little-endian. Every frame starts with the same prefix:
//
//   offset size field
//   0      4    magic       0x31544452 ("RDT1" in memory order)
//   4      1    version     1
//   5      1    type        1 WRITE, 2 READ, 3 WRITE_IMM, 4 IDENTIFY,
//                           0x81 WRITE_REPLY, 0x82 READ_REPLY
//   6      2    flags       0 (reserved; anything else is rejected)
//   8      8    request_id  chosen by the client, echoed in the reply
//
// Requests (WRITE, READ, WRITE_IMM) are 48 bytes:
//   16     8    region_id   the remote region, as resolved
//   24     8    key         the region's current TCP key (from Resolve)
//   32     8    offset      byte offset inside the region
//   40     8    length      bytes to move, 1..kMaxFramePayload
// except that WRITE_IMM (a WRITE whose landing the region's owner is told
// of, with a 32-bit immediate: RDMA WRITE with immediate) splits the last
// field:
//   40     4    length      bytes to move, 1..kMaxFramePayload
//   44     4    immediate
// followed, for WRITE and WRITE_IMM, by `length` payload bytes. A
// WRITE_IMM is answered with a WRITE_REPLY once its data is in place and
// the owner was told: RESOURCE_EXHAUSTED when the owner has a notification
// queue and none took it (full or stopped), the data being in place all the
// same; rdmad holds what the owner has no room for (a bounded backlog) and
// answers OK once the data is in place.
//
// IDENTIFY names the connecting daemon: its Peer address ("HOST:PORT"),
// which the server puts in the notifications of the WRITE_IMMs that come
// on the connection (who wrote). It has the request layout with
// region_id, key and offset 0 and `length` the address's bytes
// (1..kMaxIdentityLength), which follow it. It is answered by nothing, and
// may only be the first frame of a connection; an address that is not a
// valid HOST:PORT closes the connection. A server says in Peer.Connect
// that it takes one (TcpEndpoint.identify): servers from before it close a
// connection that sends one, so a client sends it only to those that do.
// Without one the server names the writer by the address the connection
// comes from.
//
// Replies (WRITE_REPLY, READ_REPLY) are 32 bytes:
//   16     4    status      an absl::StatusCode value; 0 = OK
//   20     4    message_length  0..kMaxMessage (0 when status is OK)
//   24     8    payload_length  READ_REPLY with OK: the request's length;
//                                otherwise 0
// followed by `message_length` bytes of UTF-8 text, then the payload.
//
// The server replies to a request only after it has received all of it
// (payload included). A rejected WRITE's payload is read and dropped before
// the error reply, so the connection stays usable. Anything that is not a valid
// frame closes the connection: the stream cannot be resynchronised.
//
// Everything here is a pure function over bytes (no I/O), so the decoder can
// be unit-tested and fuzzed on its own.
#ifndef RDMAD_DAEMON_TRANSPORT_TCP_WIRE_H_
#define RDMAD_DAEMON_TRANSPORT_TCP_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/host_port.h"

namespace rdmad::tcp {

inline constexpr uint32_t kMagic = 0x31544452;  // bytes "RDT1"
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kPrefixSize = 16;
inline constexpr size_t kRequestHeaderSize = 48;
inline constexpr size_t kReplyHeaderSize = 32;
inline constexpr size_t kMaxHeaderSize = kRequestHeaderSize;
// Largest payload of one frame. Transfers larger than this are split into
// chunks by the sender; a frame announcing more is garbage.
inline constexpr uint64_t kMaxFramePayload = 16ull << 20;
// Longest error message in a reply.
inline constexpr uint32_t kMaxMessage = 1024;
// Longest address in an IDENTIFY frame: the longest Peer address.
inline constexpr uint32_t kMaxIdentityLength = kMaxPeerAddressLength;

enum class FrameType : uint8_t {
  kWrite = 1,
  kRead = 2,
  kWriteImm = 3,
  kIdentify = 4,
  kWriteReply = 0x81,
  kReadReply = 0x82,
};

// Frames a client sends (IDENTIFY included: the request layout).
inline bool IsRequest(FrameType type) {
  return type == FrameType::kWrite || type == FrameType::kRead ||
         type == FrameType::kWriteImm || type == FrameType::kIdentify;
}
// WRITE and WRITE_IMM carry data to the server.
inline bool IsWrite(FrameType type) {
  return type == FrameType::kWrite || type == FrameType::kWriteImm;
}
inline size_t HeaderSize(FrameType type) {
  return IsRequest(type) ? kRequestHeaderSize : kReplyHeaderSize;
}
absl::string_view FrameTypeName(FrameType type);

// A decoded frame header. Request fields are set for WRITE/READ, reply
// fields for the replies; the others are 0.
struct FrameHeader {
  FrameType type = FrameType::kWrite;
  uint64_t request_id = 0;
  // Requests.
  uint64_t region_id = 0;
  uint64_t key = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t immediate = 0;  // WRITE_IMM
  // Replies.
  uint32_t status = 0;  // absl::StatusCode
  uint32_t message_length = 0;
  uint64_t payload_length = 0;

  // Bytes that follow the header on the wire: WRITE payload, IDENTIFY's
  // address, or a reply's message and payload.
  uint64_t body_length() const;
};

// Encodes a request header into exactly kRequestHeaderSize bytes at `out`
// (`immediate` only for WRITE_IMM).
void EncodeRequest(FrameType type, uint64_t request_id, uint64_t region_id,
                   uint64_t key, uint64_t offset, uint64_t length,
                   uint8_t* out, uint32_t immediate = 0);

// Encodes a reply header into exactly kReplyHeaderSize bytes at `out`.
// `message_length` must already be clipped to kMaxMessage (ClipMessage).
void EncodeReply(FrameType type, uint64_t request_id, uint32_t status,
                 uint32_t message_length, uint64_t payload_length,
                 uint8_t* out);

// The message to put in a reply: at most kMaxMessage bytes of `message`.
absl::string_view ClipMessage(absl::string_view message);

// Decodes the header at the start of `bytes`.
//   - a header, when `bytes` starts with a complete valid one (the header
//     occupies HeaderSize(header.type) bytes);
//   - std::nullopt, when `bytes` is a valid but incomplete prefix of one;
//   - DATA_LOSS naming the problem, for anything else: wrong magic or
//     version, unknown type, reserved flags set, zero or oversized length,
//     a status code outside absl's range, an OK reply with a message, an
//     oversized message, a payload where none may be, or an IDENTIFY with
//     region, key or offset set or an address longer than
//     kMaxIdentityLength.
// Garbage is rejected as soon as the bytes that prove it have arrived.
absl::StatusOr<std::optional<FrameHeader>> DecodeHeader(
    absl::Span<const uint8_t> bytes);

// A whole frame inside a buffer (the views point into it).
struct Frame {
  FrameHeader header;
  absl::string_view message;  // replies only
  absl::Span<const uint8_t> payload;
  size_t size = 0;  // header + body bytes
};

// Decodes the complete frame at the start of `bytes`, header and body:
// std::nullopt when more bytes are needed, DATA_LOSS for garbage (as
// DecodeHeader). The daemons themselves decode only headers and move
// payloads straight between socket and region memory; this is for tests,
// tools and fuzzing.
absl::StatusOr<std::optional<Frame>> DecodeFrame(absl::Span<const uint8_t> bytes);

// An IDENTIFY frame naming `address` (a valid Peer address: the caller
// checked it).
std::string EncodeIdentifyFrame(absl::string_view address);
// The address an IDENTIFY frame's body carries, checked as any address a
// peer sends (ValidatePeerAddress): DATA_LOSS saying what is wrong.
absl::StatusOr<std::string> ParseIdentity(absl::string_view body);

// Helpers for building frames in tests and tools.
// `payload` is appended as given (normally `length` bytes for a WRITE and
// none for a READ; tests pass other sizes on purpose).
std::string EncodeRequestFrame(FrameType type, uint64_t request_id,
                               uint64_t region_id, uint64_t key,
                               uint64_t offset, uint64_t length,
                               absl::string_view payload = {},
                               uint32_t immediate = 0);
std::string EncodeReplyFrame(FrameType type, uint64_t request_id,
                             const absl::Status& status,
                             absl::string_view payload);

}  // namespace rdmad::tcp

#endif  // RDMAD_DAEMON_TRANSPORT_TCP_WIRE_H_
