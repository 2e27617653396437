#include "daemon/transport/tcp/wire.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/region_address.h"

namespace rdmad::tcp {
namespace {

// Explicit byte-by-byte little-endian access: correct on any host and free
// of alignment assumptions (the compiler turns these into plain loads).
void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t Get16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void PutPrefix(FrameType type, uint64_t request_id, uint8_t* out) {
  Put32(out, kMagic);
  out[4] = kVersion;
  out[5] = static_cast<uint8_t>(type);
  Put16(out + 6, 0);
  Put64(out + 8, request_id);
}

absl::Status Garbage(absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("not an rdmad TCP data frame: ", what));
}

// The largest absl::StatusCode value (UNAUTHENTICATED).
constexpr uint32_t kMaxStatusCode = 16;

}  // namespace

absl::string_view FrameTypeName(FrameType type) {
  switch (type) {
    case FrameType::kWrite:
      return "WRITE";
    case FrameType::kRead:
      return "READ";
    case FrameType::kWriteImm:
      return "WRITE_IMM";
    case FrameType::kIdentify:
      return "IDENTIFY";
    case FrameType::kWriteReply:
      return "WRITE_REPLY";
    case FrameType::kReadReply:
      return "READ_REPLY";
  }
  return "UNKNOWN";
}

uint64_t FrameHeader::body_length() const {
  switch (type) {
    case FrameType::kWrite:
    case FrameType::kWriteImm:
    case FrameType::kIdentify:
      return length;
    case FrameType::kRead:
      return 0;
    case FrameType::kWriteReply:
    case FrameType::kReadReply:
      return uint64_t{message_length} + payload_length;
  }
  return 0;
}

void EncodeRequest(FrameType type, uint64_t request_id, uint64_t region_id,
                   uint64_t key, uint64_t offset, uint64_t length,
                   uint8_t* out, uint32_t immediate) {
  PutPrefix(type, request_id, out);
  Put64(out + 16, region_id);
  Put64(out + 24, key);
  Put64(out + 32, offset);
  if (type == FrameType::kWriteImm) {
    Put32(out + 40, static_cast<uint32_t>(length));
    Put32(out + 44, immediate);
  } else {
    Put64(out + 40, length);
  }
}

void EncodeReply(FrameType type, uint64_t request_id, uint32_t status,
                 uint32_t message_length, uint64_t payload_length,
                 uint8_t* out) {
  PutPrefix(type, request_id, out);
  Put32(out + 16, status);
  Put32(out + 20, message_length);
  Put64(out + 24, payload_length);
}

absl::string_view ClipMessage(absl::string_view message) {
  return message.substr(0, kMaxMessage);
}

absl::StatusOr<std::optional<FrameHeader>> DecodeHeader(
    absl::Span<const uint8_t> bytes) {
  const size_t n = bytes.size();
  const uint8_t* p = bytes.data();
  // Check each prefix field as soon as it is complete, so that a peer
  // speaking another protocol is turned away on its first bytes.
  if (n >= 4 && Get32(p) != kMagic) {
    return Garbage(absl::StrFormat("bad magic 0x%08x", Get32(p)));
  }
  if (n >= 5 && p[4] != kVersion) {
    return Garbage(absl::StrCat("unsupported version ", p[4], " (this daemon "
                                "speaks version ", kVersion, ")"));
  }
  if (n < 6) return std::nullopt;
  const uint8_t raw_type = p[5];
  if (raw_type != static_cast<uint8_t>(FrameType::kWrite) &&
      raw_type != static_cast<uint8_t>(FrameType::kRead) &&
      raw_type != static_cast<uint8_t>(FrameType::kWriteImm) &&
      raw_type != static_cast<uint8_t>(FrameType::kIdentify) &&
      raw_type != static_cast<uint8_t>(FrameType::kWriteReply) &&
      raw_type != static_cast<uint8_t>(FrameType::kReadReply)) {
    return Garbage(absl::StrFormat("unknown frame type 0x%02x", raw_type));
  }
  if (n >= 8 && Get16(p + 6) != 0) {
    return Garbage(absl::StrFormat("reserved flags 0x%04x set", Get16(p + 6)));
  }
  FrameHeader h;
  h.type = static_cast<FrameType>(raw_type);
  if (n < HeaderSize(h.type)) return std::nullopt;
  h.request_id = Get64(p + 8);
  if (IsRequest(h.type)) {
    h.region_id = Get64(p + 16);
    h.key = Get64(p + 24);
    h.offset = Get64(p + 32);
    if (h.type == FrameType::kWriteImm) {
      h.length = Get32(p + 40);
      h.immediate = Get32(p + 44);
    } else {
      h.length = Get64(p + 40);
    }
    if (h.length == 0) return Garbage("request of length 0");
    if (h.type == FrameType::kIdentify) {
      if (h.region_id != 0 || h.key != 0 || h.offset != 0) {
        return Garbage("IDENTIFY with a region, key or offset");
      }
      if (h.length > kMaxIdentityLength) {
        return Garbage(absl::StrCat("IDENTIFY of ", h.length,
                                    " bytes exceeds the limit of ",
                                    kMaxIdentityLength));
      }
    }
    if (h.length > kMaxFramePayload) {
      return Garbage(absl::StrCat("request of ", h.length,
                                  " bytes exceeds the frame limit of ",
                                  kMaxFramePayload));
    }
    return h;
  }
  h.status = Get32(p + 16);
  h.message_length = Get32(p + 20);
  h.payload_length = Get64(p + 24);
  if (h.status > kMaxStatusCode) {
    return Garbage(absl::StrCat("unknown status code ", h.status));
  }
  if (h.message_length > kMaxMessage) {
    return Garbage(absl::StrCat("reply message of ", h.message_length,
                                " bytes exceeds the limit of ", kMaxMessage));
  }
  if (h.status == 0 && h.message_length != 0) {
    return Garbage("OK reply carries an error message");
  }
  const bool carries_data = h.type == FrameType::kReadReply && h.status == 0;
  if (carries_data) {
    if (h.payload_length == 0) return Garbage("OK READ reply without data");
    if (h.payload_length > kMaxFramePayload) {
      return Garbage(absl::StrCat("reply of ", h.payload_length,
                                  " bytes exceeds the frame limit of ",
                                  kMaxFramePayload));
    }
  } else if (h.payload_length != 0) {
    return Garbage(absl::StrCat(FrameTypeName(h.type),
                                h.status == 0 ? "" : " with an error",
                                " carries ", h.payload_length,
                                " bytes of data"));
  }
  return h;
}

absl::StatusOr<std::optional<Frame>> DecodeFrame(
    absl::Span<const uint8_t> bytes) {
  auto header = DecodeHeader(bytes);
  if (!header.ok()) return header.status();
  if (!header->has_value()) return std::nullopt;
  Frame frame;
  frame.header = **header;
  const size_t header_size = HeaderSize(frame.header.type);
  // body_length() is bounded by kMaxFramePayload + kMaxMessage after
  // DecodeHeader, so this cannot overflow.
  const uint64_t total = header_size + frame.header.body_length();
  if (bytes.size() < total) return std::nullopt;
  size_t at = header_size;
  if (!IsRequest(frame.header.type)) {
    frame.message = absl::string_view(
        reinterpret_cast<const char*>(bytes.data() + at),
        frame.header.message_length);
    at += frame.header.message_length;
  }
  frame.payload = bytes.subspan(at, total - at);
  frame.size = total;
  return frame;
}

std::string EncodeIdentifyFrame(absl::string_view address) {
  return EncodeRequestFrame(FrameType::kIdentify, 0, 0, 0, 0, address.size(),
                            address);
}

absl::StatusOr<std::string> ParseIdentity(absl::string_view body) {
  if (absl::Status s = ValidatePeerAddress(body); !s.ok()) {
    return Garbage(
        absl::StrCat("IDENTIFY does not name a Peer address: ", s.message()));
  }
  return std::string(body);
}

std::string EncodeRequestFrame(FrameType type, uint64_t request_id,
                               uint64_t region_id, uint64_t key,
                               uint64_t offset, uint64_t length,
                               absl::string_view payload, uint32_t immediate) {
  std::string out(kRequestHeaderSize, '\0');
  EncodeRequest(type, request_id, region_id, key, offset, length,
                reinterpret_cast<uint8_t*>(out.data()), immediate);
  out.append(payload.data(), payload.size());
  return out;
}

std::string EncodeReplyFrame(FrameType type, uint64_t request_id,
                             const absl::Status& status,
                             absl::string_view payload) {
  const absl::string_view message = ClipMessage(status.message());
  std::string out(kReplyHeaderSize, '\0');
  EncodeReply(type, request_id, static_cast<uint32_t>(status.code()),
              static_cast<uint32_t>(message.size()), payload.size(),
              reinterpret_cast<uint8_t*>(out.data()));
  out.append(message.data(), message.size());
  out.append(payload.data(), payload.size());
  return out;
}

}  // namespace rdmad::tcp
