// libFuzzer target: the verbs notice and ack decoders (daemon/transport/
// verbs/verbs_notice.h), which parse what another daemon SENDs after a
// WRITE with an immediate, and the check of a decoded notice against the
// region table.
//
// Checks, beyond "no crash, no UB, no leak": only messages of exactly
// their size decode; what decodes encodes to a message that decodes to
// the same fields; an ack's result is always a known one; a notice checked
// against a table with one exported region is delivered only for a range
// inside that region under its current key.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "daemon/core/region_table.h"
#include "daemon/transport/verbs/verbs_notice.h"

namespace {

using ::rdmad::core::RegionTable;
using ::rdmad::verbs::Notice;
using ::rdmad::verbs::NoticeAck;
using ::rdmad::verbs::NoticeResult;

void Check(bool ok) {
  if (!ok) std::abort();
}

constexpr uint64_t kRegionSize = 4096;
constexpr uint32_t kRkey = 0x1234;

// Registers on one device, "rxe0", with rkey kRkey.
class OneDeviceRegistrar final : public rdmad::core::MemoryRegistrar {
 public:
  absl::StatusOr<std::unique_ptr<rdmad::core::Registration>> Register(
      void*, size_t, rdmad::core::RemoteAccess) override {
    return std::make_unique<Keys>();
  }

 private:
  class Keys final : public rdmad::core::Registration {
   public:
    const std::vector<rdmad::core::DeviceRegistration>& keys() const override {
      return keys_;
    }

   private:
    std::vector<rdmad::core::DeviceRegistration> keys_{{"rxe0", 1, kRkey}};
  };
};

// One region of kRegionSize bytes, exported read-write on "rxe0".
struct Table {
  OneDeviceRegistrar registrar;
  RegionTable regions{&registrar, rdmad::core::RegionLimits{}};
  uint64_t id = 0;
  Table() {
    rdmad::core::AllocateOptions options;
    options.name = "target";
    options.size = kRegionSize;
    options.daemon_owned = true;
    options.export_access = rdmad::core::RemoteAccess::kReadWrite;
    auto region = regions.Allocate(rdmad::core::Caller{1, 0, 0, 1}, options);
    Check(region.ok());
    id = (*region)->id();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rdmad::verbs;
  static Table* const table = new Table();
  const absl::Span<const uint8_t> bytes(data, size);

  auto notice = DecodeNotice(bytes);
  if (notice.ok()) {
    Check(size == kNoticeBytes);
    auto again = DecodeNotice(EncodeNotice(*notice));
    Check(again.ok());
    Check(again->tag == notice->tag && again->region_id == notice->region_id &&
          again->offset == notice->offset && again->length == notice->length &&
          again->rkey == notice->rkey && again->immediate == notice->immediate);
    // Aimed at the table's region under its key half the time, so the
    // range checks run.
    Notice aimed = *notice;
    if ((aimed.tag & 1) != 0) {
      aimed.region_id = table->id;
      aimed.rkey = kRkey;
    }
    std::shared_ptr<rdmad::core::Region> region;
    const NoticeResult result = CheckNotice(
        table->regions, "rxe0", aimed, CallerSockaddr("192.0.2.2"), &region);
    Check(static_cast<uint32_t>(result) <= kMaxNoticeResult);
    if (result == NoticeResult::kDelivered) {
      Check(aimed.region_id == table->id && aimed.rkey == kRkey);
      Check(region != nullptr && aimed.length > 0 &&
            aimed.offset <= kRegionSize &&
            aimed.length <= kRegionSize - aimed.offset);
    }
  }

  auto ack = DecodeNoticeAck(bytes);
  if (ack.ok()) {
    Check(size == kNoticeAckBytes);
    Check(static_cast<uint32_t>(ack->result) <= kMaxNoticeResult);
    auto again = DecodeNoticeAck(EncodeNoticeAck(*ack));
    Check(again.ok() && again->tag == ack->tag && again->result == ack->result);
  }
  return 0;
}
