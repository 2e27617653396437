#include "daemon/transport/verbs/verbs_notice.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/notification_sink.h"

namespace rdmad::verbs {
namespace {

constexpr uint16_t kKindNotice = 1;
constexpr uint16_t kKindAck = 2;

// Fixed-width little-endian fields, whatever the host's byte order.
template <typename T>
void Put(uint8_t* out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out[i] = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i));
  }
}

template <typename T>
T Get(const uint8_t* in) {
  uint64_t value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<uint64_t>(in[i]) << (8 * i);
  }
  return static_cast<T>(value);
}

void PutHeader(uint8_t* out, uint16_t kind) {
  Put<uint32_t>(out, kNoticeMagic);
  Put<uint16_t>(out + 4, kNoticeVersion);
  Put<uint16_t>(out + 6, kind);
}

absl::Status CheckHeader(absl::Span<const uint8_t> bytes, size_t want_size,
                         uint16_t want_kind, absl::string_view what) {
  if (bytes.size() != want_size) {
    return absl::DataLossError(absl::StrCat("a verbs ", what, " is ",
                                            want_size, " bytes, got ",
                                            bytes.size()));
  }
  const uint8_t* in = bytes.data();
  if (Get<uint32_t>(in) != kNoticeMagic) {
    return absl::DataLossError(
        absl::StrCat("a verbs ", what, " without the notice magic"));
  }
  if (const uint16_t version = Get<uint16_t>(in + 4);
      version != kNoticeVersion) {
    return absl::DataLossError(absl::StrCat("a verbs ", what, " of version ",
                                            version, " (this rdmad speaks ",
                                            kNoticeVersion, ")"));
  }
  if (const uint16_t kind = Get<uint16_t>(in + 6); kind != want_kind) {
    return absl::DataLossError(absl::StrCat("a verbs ", what, " of kind ",
                                            kind, " (want ", want_kind, ")"));
  }
  return absl::OkStatus();
}

// Compares keys without an early exit, like the TCP data server.
bool KeysEqual(uint32_t a, uint32_t b) {
  volatile uint32_t diff = a ^ b;
  return diff == 0;
}

bool RangeInside(uint64_t size, uint64_t offset, uint64_t length) {
  return length > 0 && offset <= size && length <= size - offset;
}

}  // namespace

std::array<uint8_t, kNoticeBytes> EncodeNotice(const Notice& notice) {
  std::array<uint8_t, kNoticeBytes> out{};
  uint8_t* p = out.data();
  PutHeader(p, kKindNotice);
  Put<uint64_t>(p + 8, notice.tag);
  Put<uint64_t>(p + 16, notice.region_id);
  Put<uint64_t>(p + 24, notice.offset);
  Put<uint64_t>(p + 32, notice.length);
  Put<uint32_t>(p + 40, notice.rkey);
  Put<uint32_t>(p + 44, notice.immediate);
  return out;
}

std::array<uint8_t, kNoticeAckBytes> EncodeNoticeAck(const NoticeAck& ack) {
  std::array<uint8_t, kNoticeAckBytes> out{};
  uint8_t* p = out.data();
  PutHeader(p, kKindAck);
  Put<uint64_t>(p + 8, ack.tag);
  Put<uint32_t>(p + 16, static_cast<uint32_t>(ack.result));
  Put<uint32_t>(p + 20, 0);
  return out;
}

absl::StatusOr<Notice> DecodeNotice(absl::Span<const uint8_t> bytes) {
  if (absl::Status s = CheckHeader(bytes, kNoticeBytes, kKindNotice, "notice");
      !s.ok()) {
    return s;
  }
  const uint8_t* p = bytes.data();
  Notice notice;
  notice.tag = Get<uint64_t>(p + 8);
  notice.region_id = Get<uint64_t>(p + 16);
  notice.offset = Get<uint64_t>(p + 24);
  notice.length = Get<uint64_t>(p + 32);
  notice.rkey = Get<uint32_t>(p + 40);
  notice.immediate = Get<uint32_t>(p + 44);
  return notice;
}

absl::StatusOr<NoticeAck> DecodeNoticeAck(absl::Span<const uint8_t> bytes) {
  if (absl::Status s =
          CheckHeader(bytes, kNoticeAckBytes, kKindAck, "notice ack");
      !s.ok()) {
    return s;
  }
  const uint8_t* p = bytes.data();
  const uint32_t result = Get<uint32_t>(p + 16);
  if (result > kMaxNoticeResult) {
    return absl::DataLossError(
        absl::StrCat("a verbs notice ack with unknown result ", result));
  }
  if (Get<uint32_t>(p + 20) != 0) {
    return absl::DataLossError(
        "a verbs notice ack with its reserved field set");
  }
  NoticeAck ack;
  ack.tag = Get<uint64_t>(p + 8);
  ack.result = static_cast<NoticeResult>(result);
  return ack;
}

std::optional<sockaddr_storage> CallerSockaddr(absl::string_view ip) {
  sockaddr_storage address{};
  const std::string text(ip);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
  if (::inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    return address;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
  if (::inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    return address;
  }
  return std::nullopt;
}

NoticeResult CheckNotice(const core::RegionTable& regions,
                         absl::string_view device, const Notice& notice,
                         const std::optional<sockaddr_storage>& caller,
                         std::shared_ptr<core::Region>* region) {
  absl::StatusOr<std::shared_ptr<core::Region>> found =
      regions.FindExportedById(notice.region_id);
  if (!found.ok()) return NoticeResult::kNotExported;
  const core::ExportState exported = (*found)->exported();
  if (exported.access == core::RemoteAccess::kNone) {
    return NoticeResult::kNotExported;  // revoked since the lookup
  }
  bool key_matches = false;
  for (const core::DeviceRegistration& key : exported.keys) {
    // Every entry is compared, so timing says nothing about which matched.
    key_matches |= key.device == device && key.rkey != 0 &&
                   KeysEqual(key.rkey, notice.rkey);
  }
  if (!key_matches) return NoticeResult::kKeyMismatch;
  if (!core::Allows(exported.access, core::RemoteAccess::kWrite)) {
    return NoticeResult::kReadOnly;
  }
  if (!RangeInside((*found)->size(), notice.offset, notice.length)) {
    return NoticeResult::kOutOfRange;
  }
  const bool admitted =
      caller.has_value() ? (*found)->AdmitsDataPeer(*caller)
                         : exported.allow == nullptr || exported.allow->empty();
  if (!admitted) return NoticeResult::kNotAdmitted;
  if (region != nullptr) *region = *std::move(found);
  return NoticeResult::kDelivered;
}

absl::string_view NoticeResultName(NoticeResult result) {
  switch (result) {
    case NoticeResult::kDelivered:
      return "delivered";
    case NoticeResult::kNotExported:
      return "not exported";
    case NoticeResult::kKeyMismatch:
      return "key mismatch";
    case NoticeResult::kOutOfRange:
      return "out of range";
    case NoticeResult::kReadOnly:
      return "read-only";
    case NoticeResult::kNotServed:
      return "not served";
    case NoticeResult::kNotTold:
      return "owner not told";
    case NoticeResult::kNotAdmitted:
      return "not admitted";
  }
  return "unknown";
}

absl::Status NoticeResultStatus(NoticeResult result, absl::string_view peer,
                                absl::string_view region_label) {
  const std::string where = absl::StrCat(region_label, " on peer ", peer);
  switch (result) {
    case NoticeResult::kDelivered:
      return absl::OkStatus();
    case NoticeResult::kNotExported:
      return absl::NotFoundError(absl::StrCat(
          where, " is no longer exported: the data was written but its "
                 "owner was not notified; resolve the region again"));
    case NoticeResult::kKeyMismatch:
      return absl::PermissionDeniedError(absl::StrCat(
          "the key does not match the current export of ", where,
          ": it was re-exported or revoked since it was resolved; the owner "
          "was not notified; resolve it again"));
    case NoticeResult::kOutOfRange:
      return absl::OutOfRangeError(absl::StrCat(
          "the notified range is outside ", where,
          "; the owner was not notified"));
    case NoticeResult::kReadOnly:
      return absl::PermissionDeniedError(absl::StrCat(
          where, " is exported read-only: it accepts no WRITE"));
    case NoticeResult::kNotServed:
      return absl::UnavailableError(absl::StrCat(
          "peer ", peer,
          " is not serving notifications yet (starting or stopping); retry"));
    case NoticeResult::kNotTold:
      return core::OwnerNotToldError(where);
    case NoticeResult::kNotAdmitted:
      return absl::PermissionDeniedError(absl::StrCat(
          "the export of ", where,
          " does not admit this daemon (its access list): the owner was not "
          "notified; ask the owner to add this daemon (rdmactl export "
          "--allow)"));
  }
  return absl::InternalError("unknown notice result");
}

}  // namespace rdmad::verbs
