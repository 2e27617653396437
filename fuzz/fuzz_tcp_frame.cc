// libFuzzer target: the TCP data channel's frame decoder (daemon/transport/
// tcp/wire.h), which parses bytes straight from other daemons.
//
// Checks, beyond "no crash, no UB, no leak": a decoded frame never claims
// more bytes than it was given, a header decoded from a prefix agrees with
// the one decoded from the whole input, re-encoding a decoded request
// header gives back the same bytes, and an IDENTIFY's address is checked.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "daemon/transport/tcp/wire.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rdmad::tcp;
  const absl::Span<const uint8_t> bytes(data, size);
  auto frame = DecodeFrame(bytes);
  auto header = DecodeHeader(bytes);
  Check(frame.ok() == header.ok() || (header.ok() && !frame.ok()) ||
        (!header.ok() && !frame.ok()));
  if (frame.ok() && frame->has_value()) {
    const Frame& f = **frame;
    Check(f.size <= size);
    Check(f.size == HeaderSize(f.header.type) + f.header.body_length());
    Check(f.payload.size() <= f.size);
    Check(header.ok() && header->has_value());
    Check((*header)->request_id == f.header.request_id);
    if (IsRequest(f.header.type)) {
      uint8_t again[kRequestHeaderSize];
      EncodeRequest(f.header.type, f.header.request_id, f.header.region_id,
                    f.header.key, f.header.offset, f.header.length, again,
                    f.header.immediate);
      Check(std::memcmp(again, data, kRequestHeaderSize) == 0);
    }
    if (f.header.type == FrameType::kIdentify) {
      // A peer's name for itself: what passes the check is the body as
      // sent, nothing added or cut.
      const absl::string_view body(
          reinterpret_cast<const char*>(f.payload.data()), f.payload.size());
      auto address = ParseIdentity(body);
      if (address.ok()) Check(*address == body);
    }
  }
  // Every prefix of garbage is garbage or incomplete, never a valid header
  // different from the whole input's.
  if (header.ok() && header->has_value()) {
    const size_t n = HeaderSize((*header)->type);
    for (size_t cut = 0; cut < n; cut += 7) {
      auto partial = DecodeHeader(bytes.subspan(0, cut));
      Check(partial.ok() && !partial->has_value());
    }
  }
  return 0;
}
