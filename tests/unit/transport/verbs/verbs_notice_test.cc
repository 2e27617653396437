// The notices that announce a WRITE with an immediate over verbs
// (daemon/transport/verbs/verbs_notice.h): the wire format, decoding of
// whatever a peer may send, and the check against the region table that
// decides whether the region's owner is told.
#include "daemon/transport/verbs/verbs_notice.h"

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::verbs {
namespace {

using ::testing::HasSubstr;

constexpr core::Caller kOwner{1, 1000, 1000, 11};

// Registrations with an rkey on two devices, different for each one made.
class TwoDeviceRegistrar final : public core::MemoryRegistrar {
 public:
  class Keys final : public core::Registration {
   public:
    explicit Keys(uint32_t n) {
      keys_.push_back({"dev0", n, 0x1000 + n});
      keys_.push_back({"dev1", n, 0x2000 + n});
    }
    const std::vector<core::DeviceRegistration>& keys() const override {
      return keys_;
    }

   private:
    std::vector<core::DeviceRegistration> keys_;
  };

  absl::StatusOr<std::unique_ptr<core::Registration>> Register(
      void*, size_t, core::RemoteAccess) override {
    absl::MutexLock lock(&mu_);
    return std::make_unique<Keys>(++made_);
  }

 private:
  absl::Mutex mu_;
  uint32_t made_ = 0;
};

class NoticeCheckTest : public ::testing::Test {
 protected:
  std::shared_ptr<core::Region> Make(std::string name, uint64_t size,
                                     core::RemoteAccess access) {
    core::AllocateOptions o;
    o.name = std::move(name);
    o.size = size;
    o.daemon_owned = true;
    o.export_access = access;
    auto region = table_.Allocate(kOwner, o);
    EXPECT_TRUE(region.ok()) << region.status();
    return region.ok() ? *region : nullptr;
  }

  // The rkey of the region's current export on `device`.
  static uint32_t RkeyOn(const core::Region& region, const std::string& device) {
    for (const auto& k : region.exported().keys) {
      if (k.device == device) return k.rkey;
    }
    return 0;
  }

  Notice For(const core::Region& region, uint64_t offset, uint64_t length) {
    Notice n;
    n.tag = 9;
    n.region_id = region.id();
    n.offset = offset;
    n.length = length;
    n.rkey = RkeyOn(region, "dev0");
    n.immediate = 0xfeed;
    return n;
  }

  // `caller`: the address the notice's QP was made for ("" = unknown).
  NoticeResult Check(const Notice& notice,
                     std::shared_ptr<core::Region>* region = nullptr,
                     const std::string& caller = "10.0.0.2") {
    return CheckNotice(table_, "dev0", notice, CallerSockaddr(caller), region);
  }

  TwoDeviceRegistrar registrar_;
  core::RegionTable table_{&registrar_, core::RegionLimits{}};
};

TEST(NoticeWireTest, NoticeRoundTripsWithTheDocumentedLayout) {
  Notice n;
  n.tag = 0x0102030405060708;
  n.region_id = 42;
  n.offset = 4096;
  n.length = 12;
  n.rkey = 0xa1b2c3d4;
  n.immediate = 0xfeed;
  const std::array<uint8_t, kNoticeBytes> bytes = EncodeNotice(n);
  // Little-endian fields at fixed places, whatever the host.
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()), 4), "RDNT");
  EXPECT_EQ(bytes[4], 1);  // version
  EXPECT_EQ(bytes[6], 1);  // kind: notice
  EXPECT_EQ(bytes[8], 0x08);
  EXPECT_EQ(bytes[15], 0x01);
  EXPECT_EQ(bytes[16], 42);
  EXPECT_EQ(bytes[25], 0x10);  // 4096
  EXPECT_EQ(bytes[32], 12);
  EXPECT_EQ(bytes[40], 0xd4);
  EXPECT_EQ(bytes[43], 0xa1);
  EXPECT_EQ(bytes[44], 0xed);
  EXPECT_EQ(bytes[45], 0xfe);

  absl::StatusOr<Notice> back = DecodeNotice(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tag, n.tag);
  EXPECT_EQ(back->region_id, n.region_id);
  EXPECT_EQ(back->offset, n.offset);
  EXPECT_EQ(back->length, n.length);
  EXPECT_EQ(back->rkey, n.rkey);
  EXPECT_EQ(back->immediate, n.immediate);
}

TEST(NoticeWireTest, AckRoundTripsEveryResult) {
  for (uint32_t r = 0; r <= kMaxNoticeResult; ++r) {
    const NoticeAck ack{77 + r, static_cast<NoticeResult>(r)};
    const std::array<uint8_t, kNoticeAckBytes> bytes = EncodeNoticeAck(ack);
    EXPECT_EQ(bytes[6], 2);  // kind: ack
    absl::StatusOr<NoticeAck> back = DecodeNoticeAck(bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->tag, 77 + r);
    EXPECT_EQ(back->result, ack.result);
  }
}

TEST(NoticeWireTest, DecodingRefusesWhatIsNotExactlyANotice) {
  const std::array<uint8_t, kNoticeBytes> good = EncodeNotice(Notice{});
  // Wrong sizes: short, long (a slot holds 64 bytes), empty.
  for (size_t size : {size_t{0}, size_t{8}, kNoticeBytes - 1}) {
    auto r = DecodeNotice(absl::MakeConstSpan(good.data(), size));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << size;
  }
  std::vector<uint8_t> longer(good.begin(), good.end());
  longer.push_back(0);
  EXPECT_EQ(DecodeNotice(longer).status().code(), absl::StatusCode::kDataLoss);

  auto corrupt = [&](size_t at, uint8_t value) {
    std::array<uint8_t, kNoticeBytes> bad = good;
    bad[at] = value;
    return DecodeNotice(bad).status();
  };
  EXPECT_THAT(corrupt(0, 'X').message(), HasSubstr("magic"));
  EXPECT_THAT(corrupt(4, 2).message(), HasSubstr("version 2"));
  EXPECT_THAT(corrupt(6, 2).message(), HasSubstr("kind 2"));
  // An ack is not a notice, and a notice is not an ack.
  const std::array<uint8_t, kNoticeAckBytes> ack = EncodeNoticeAck(NoticeAck{});
  EXPECT_FALSE(DecodeNotice(ack).ok());
  EXPECT_FALSE(DecodeNoticeAck(good).ok());
}

TEST(NoticeWireTest, AckDecodingRefusesUnknownResultsAndReservedBits) {
  std::array<uint8_t, kNoticeAckBytes> bytes = EncodeNoticeAck(NoticeAck{});
  bytes[16] = kMaxNoticeResult + 1;
  EXPECT_THAT(DecodeNoticeAck(bytes).status().message(),
              HasSubstr("unknown result"));
  bytes = EncodeNoticeAck(NoticeAck{});
  bytes[23] = 1;
  EXPECT_THAT(DecodeNoticeAck(bytes).status().message(), HasSubstr("reserved"));
}

TEST(NoticeWireTest, RandomBytesNeverDecodeIntoSomethingElse) {
  // Whatever a peer sends, decoding either refuses it or gives back exactly
  // the fields that were sent.
  std::mt19937_64 random(1234);
  const std::array<uint8_t, kNoticeBytes> good = EncodeNotice(Notice{});
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> bytes(random() % (kNoticeBytes + 17));
    for (auto& b : bytes) b = static_cast<uint8_t>(random());
    if (i % 2 == 0 && bytes.size() >= 8) {
      std::memcpy(bytes.data(), good.data(), 8);  // past the header check
    }
    absl::StatusOr<Notice> n = DecodeNotice(bytes);
    if (n.ok()) {
      ASSERT_EQ(bytes.size(), kNoticeBytes);
      const std::array<uint8_t, kNoticeBytes> again = EncodeNotice(*n);
      EXPECT_EQ(std::memcmp(again.data(), bytes.data(), kNoticeBytes), 0);
    }
    absl::StatusOr<NoticeAck> a = DecodeNoticeAck(bytes);
    if (a.ok()) {
      EXPECT_LE(static_cast<uint32_t>(a->result), kMaxNoticeResult);
    }
  }
}

TEST_F(NoticeCheckTest, AGoodNoticeIsDeliveredWithItsRegion) {
  auto region = Make("inbox", 64 * 1024, core::RemoteAccess::kReadWrite);
  ASSERT_NE(region, nullptr);
  std::shared_ptr<core::Region> found;
  EXPECT_EQ(Check(For(*region, 4096, 12), &found), NoticeResult::kDelivered);
  EXPECT_EQ(found, region);
  // The whole region, and its last byte.
  EXPECT_EQ(Check(For(*region, 0, 64 * 1024)), NoticeResult::kDelivered);
  EXPECT_EQ(Check(For(*region, 64 * 1024 - 1, 1)), NoticeResult::kDelivered);
  // A write-only export is enough.
  auto sink = Make("sink", 4096, core::RemoteAccess::kWrite);
  EXPECT_EQ(Check(For(*sink, 0, 1)), NoticeResult::kDelivered);
}

TEST_F(NoticeCheckTest, UnknownOrUnexportedRegionsAreNotExported) {
  auto region = Make("inbox", 4096, core::RemoteAccess::kReadWrite);
  auto local = Make("local", 4096, core::RemoteAccess::kNone);
  Notice n = For(*region, 0, 8);
  std::shared_ptr<core::Region> found;
  n.region_id = 0;
  EXPECT_EQ(Check(n, &found), NoticeResult::kNotExported);
  n.region_id = ~0ull;
  EXPECT_EQ(Check(n, &found), NoticeResult::kNotExported);
  n.region_id = local->id();
  EXPECT_EQ(Check(n, &found), NoticeResult::kNotExported);
  EXPECT_EQ(found, nullptr) << "a refused notice hands out no region";
  // Revoked, then freed.
  ASSERT_TRUE(table_.Export(kOwner, {region->id(), ""}, core::RemoteAccess::kNone).ok());
  EXPECT_EQ(Check(For(*region, 0, 8)), NoticeResult::kNotExported);
  ASSERT_TRUE(table_.Free(kOwner, {region->id(), ""}).ok());
  n.region_id = region->id();
  EXPECT_EQ(Check(n), NoticeResult::kNotExported);
}

TEST_F(NoticeCheckTest, OnlyTheCurrentExportsRkeyOnThisDeviceMatches) {
  auto region = Make("inbox", 4096, core::RemoteAccess::kReadWrite);
  auto other = Make("other", 4096, core::RemoteAccess::kReadWrite);
  Notice n = For(*region, 0, 8);
  const uint32_t good = n.rkey;
  n.rkey = good + 1;
  EXPECT_EQ(Check(n), NoticeResult::kKeyMismatch);
  n.rkey = 0;
  EXPECT_EQ(Check(n), NoticeResult::kKeyMismatch);
  n.rkey = RkeyOn(*region, "dev1");  // the same export on another device
  EXPECT_EQ(Check(n), NoticeResult::kKeyMismatch);
  n.rkey = RkeyOn(*other, "dev0");  // another region's key
  EXPECT_EQ(Check(n), NoticeResult::kKeyMismatch);
  // On the other device its own rkey is the one.
  n.rkey = RkeyOn(*region, "dev1");
  EXPECT_EQ(CheckNotice(table_, "dev1", n, CallerSockaddr("10.0.0.2"), nullptr),
            NoticeResult::kDelivered);
  // After a re-export the old key no longer names it.
  ASSERT_TRUE(
      table_.Export(kOwner, {region->id(), ""}, core::RemoteAccess::kReadWrite)
          .ok());
  n.rkey = good;
  EXPECT_EQ(Check(n), NoticeResult::kKeyMismatch);
  EXPECT_EQ(Check(For(*region, 0, 8)), NoticeResult::kDelivered);
}

TEST_F(NoticeCheckTest, AReadOnlyExportTakesNoNotice) {
  auto region = Make("ro", 4096, core::RemoteAccess::kRead);
  EXPECT_EQ(Check(For(*region, 0, 8)), NoticeResult::kReadOnly);
}

TEST_F(NoticeCheckTest, RangesOutsideTheRegionOrEmptyAreRefused) {
  auto region = Make("inbox", 4096, core::RemoteAccess::kReadWrite);
  EXPECT_EQ(Check(For(*region, 4096, 1)), NoticeResult::kOutOfRange);
  EXPECT_EQ(Check(For(*region, 4000, 97)), NoticeResult::kOutOfRange);
  EXPECT_EQ(Check(For(*region, 0, 4097)), NoticeResult::kOutOfRange);
  EXPECT_EQ(Check(For(*region, 0, 0)), NoticeResult::kOutOfRange);
  // offset + length wraps around 2^64.
  EXPECT_EQ(Check(For(*region, ~0ull, 2)), NoticeResult::kOutOfRange);
  EXPECT_EQ(Check(For(*region, 8, ~0ull)), NoticeResult::kOutOfRange);
}

// A notice is held to the export's access list by the address its QP was
// made for (the Peer.Connect's caller), as a TCP data connection is: a
// peer the list does not admit cannot tell the owner anything, even with
// the right rkey. A certificate entry admits the addresses it admitted at
// Resolve. An unknown caller passes only an export without a list.
TEST_F(NoticeCheckTest, TheExportsAccessListDecidesWhoMayNotify) {
  auto region = Make("inbox", 4096, core::RemoteAccess::kReadWrite);
  EXPECT_EQ(Check(For(*region, 0, 8), nullptr, ""), NoticeResult::kDelivered)
      << "no list: anyone with the rkey";
  auto list =
      core::ExportAccessList::Parse({{"10.0.0.0/24", {}}, {"cert:b", {}}});
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_TRUE(table_
                  .Export(kOwner, {region->id(), ""},
                          core::RemoteAccess::kReadWrite,
                          std::make_shared<core::ExportAccessList>(*list))
                  .ok());
  const Notice n = For(*region, 0, 8);  // the new export's rkey
  EXPECT_EQ(Check(n, nullptr, "10.0.0.2"), NoticeResult::kDelivered);
  EXPECT_EQ(Check(n, nullptr, "10.9.9.9"), NoticeResult::kNotAdmitted);
  EXPECT_EQ(Check(n, nullptr, "fd00::2"), NoticeResult::kNotAdmitted);
  EXPECT_EQ(Check(n, nullptr, ""), NoticeResult::kNotAdmitted);
  region->AdmitDataPeer("10.9.9.9");  // what Resolve does for cert:b
  EXPECT_EQ(Check(n, nullptr, "10.9.9.9"), NoticeResult::kDelivered);
  const absl::Status s = NoticeResultStatus(NoticeResult::kNotAdmitted,
                                            "10.0.0.1:7471", "region 'inbox'");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("does not admit this daemon"));
}

TEST(NoticeResultStatusTest, RefusalsGetTheCodesTheTcpTransportGives) {
  EXPECT_TRUE(NoticeResultStatus(NoticeResult::kDelivered, "p:1", "region 'a'").ok());
  const struct {
    NoticeResult result;
    absl::StatusCode code;
  } cases[] = {
      {NoticeResult::kNotExported, absl::StatusCode::kNotFound},
      {NoticeResult::kKeyMismatch, absl::StatusCode::kPermissionDenied},
      {NoticeResult::kOutOfRange, absl::StatusCode::kOutOfRange},
      {NoticeResult::kReadOnly, absl::StatusCode::kPermissionDenied},
      {NoticeResult::kNotServed, absl::StatusCode::kUnavailable},
      {NoticeResult::kNotTold, absl::StatusCode::kResourceExhausted},
      {NoticeResult::kNotAdmitted, absl::StatusCode::kPermissionDenied},
  };
  for (const auto& c : cases) {
    const absl::Status s = NoticeResultStatus(c.result, "10.0.0.2:7471", "region 'a'");
    EXPECT_EQ(s.code(), c.code) << NoticeResultName(c.result);
    EXPECT_THAT(s.message(), HasSubstr("10.0.0.2:7471"));
  }
  EXPECT_THAT(NoticeResultStatus(NoticeResult::kKeyMismatch, "p", "region 'a'")
                  .message(),
              HasSubstr("region 'a'"));
}

}  // namespace
}  // namespace rdmad::verbs
