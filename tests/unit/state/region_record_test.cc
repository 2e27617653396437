// The kept-region record: what EncodeRegionRecord writes parses back to the
// same record, and every kind of damage (a flipped bit, a cut, a line out of
// place, a value out of range even with a matching checksum) is refused
// with a message saying what is wrong.
#include "daemon/state/region_record.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "daemon/state/checksum.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::state {
namespace {

using ::testing::HasSubstr;

RegionRecord Sample() {
  RegionRecord record;
  record.slot = "5f0c2a7e91d3b846";
  record.info.name = "kv-cache.0";
  record.info.size = 1073741824;
  record.info.acl = {1000, 2000, 0640};
  record.info.export_access = core::RemoteAccess::kReadWrite;
  return record;
}

// `body` (every line but the checksum) with its correct checksum line, so
// that only the content check can refuse it.
std::string WithChecksum(const std::string& body) {
  return absl::StrCat(body, absl::StrFormat("crc32c %08x\n", Crc32c(body)));
}

std::string Body(const RegionRecord& record) {
  std::string text = EncodeRegionRecord(record);
  return text.substr(0, text.rfind("crc32c "));
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(RegionRecordTest, RoundTrips) {
  const RegionRecord record = Sample();
  const std::string text = EncodeRegionRecord(record);
  EXPECT_EQ(text.rfind("rdmad-region-record 1\nslot 5f0c2a7e91d3b846\n", 0), 0u)
      << text;
  EXPECT_THAT(text, HasSubstr("\nmode 0640\nexport rw\ncrc32c "));
  auto parsed = ParseRegionRecord(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->slot, record.slot);
  EXPECT_EQ(parsed->info.name, record.info.name);
  EXPECT_EQ(parsed->info.size, record.info.size);
  EXPECT_EQ(parsed->info.acl.uid, 1000u);
  EXPECT_EQ(parsed->info.acl.gid, 2000u);
  EXPECT_EQ(parsed->info.acl.mode, 0640u);
  EXPECT_EQ(parsed->info.export_access, core::RemoteAccess::kReadWrite);
}

TEST(RegionRecordTest, EveryExportAccessRoundTrips) {
  for (core::RemoteAccess access :
       {core::RemoteAccess::kNone, core::RemoteAccess::kRead,
        core::RemoteAccess::kWrite, core::RemoteAccess::kReadWrite}) {
    RegionRecord record = Sample();
    record.info.export_access = access;
    auto parsed = ParseRegionRecord(EncodeRegionRecord(record));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(parsed->info.export_access, access);
  }
}

TEST(RegionRecordTest, AnyFlippedBitIsCaught) {
  const std::string text = EncodeRegionRecord(Sample());
  for (size_t i = 0; i < text.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = text;
      damaged[i] = static_cast<char>(damaged[i] ^ (1 << bit));
      auto parsed = ParseRegionRecord(damaged);
      EXPECT_FALSE(parsed.ok()) << "byte " << i << " bit " << bit;
    }
  }
}

TEST(RegionRecordTest, CutShortIsDamage) {
  const std::string text = EncodeRegionRecord(Sample());
  for (size_t n = 0; n < text.size(); ++n) {
    auto parsed = ParseRegionRecord(text.substr(0, n));
    ASSERT_FALSE(parsed.ok()) << n;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << n;
  }
  EXPECT_THAT(
      ParseRegionRecord(text.substr(0, text.size() - 1)).status().message(),
      HasSubstr("newline"));
}

TEST(RegionRecordTest, BadChecksumSaysSo) {
  std::string text = EncodeRegionRecord(Sample());
  text = absl::StrReplaceAll(text, {{"size 1073741824", "size 1073741825"}});
  auto parsed = ParseRegionRecord(text);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(parsed.status().message(), HasSubstr("checksum"));
}

TEST(RegionRecordTest, OutOfRangeValuesAreRefusedEvenWithAGoodChecksum) {
  const std::string body = Body(Sample());
  const struct {
    const char* from;
    const char* to;
    const char* message;
  } cases[] = {
      {"size 1073741824", "size 0", "size"},
      {"size 1073741824", "size 01073741824", "size"},
      {"size 1073741824", "size -1", "size"},
      {"size 1073741824", "size 2251799813685249", "size"},  // 2^51 + 1
      {"size 1073741824", "size 1e9", "size"},
      {"uid 1000", "uid 4294967296", "uid"},
      {"uid 1000", "uid +1000", "uid"},
      {"gid 2000", "gid ", "gid"},
      {"mode 0640", "mode 640", "mode"},
      {"mode 0640", "mode 0800", "mode"},
      {"mode 0640", "mode 1777", "mode"},
      {"export rw", "export wr", "export"},
      {"export rw", "export rw ", "export"},
      {"name kv-cache.0", "name ../etc", "name"},
      {"name kv-cache.0", "name .hidden", "name"},
      {"name kv-cache.0", "name kv cache", "name"},
      {"slot 5f0c2a7e91d3b846", "slot 5F0C2A7E91D3B846", "slot"},
      {"slot 5f0c2a7e91d3b846", "slot 5f0c", "slot"},
      {"uid 1000\ngid 2000", "gid 2000\nuid 1000", "uid"},
      {"export rw\n", "export rw\nextra 1\n", "lines"},
      {"slot", "slot  ", "slot"},
  };
  for (const auto& c : cases) {
    const std::string text =
        WithChecksum(absl::StrReplaceAll(body, {{c.from, c.to}}));
    auto parsed = ParseRegionRecord(text);
    ASSERT_FALSE(parsed.ok()) << c.to;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << c.to;
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.message)) << c.to;
  }
}

TEST(RegionRecordTest, NewerFormatSaysWhichIsRead) {
  const std::string body = absl::StrReplaceAll(
      Body(Sample()), {{"rdmad-region-record 1", "rdmad-region-record 3"}});
  auto parsed = ParseRegionRecord(WithChecksum(body));
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(parsed.status().message(), HasSubstr("reads formats 1 and 2"));
}

// An export with an access list is kept with it (format 2), so that a
// restart never brings the export back open to every peer.
TEST(RegionRecordTest, AccessListRoundTripsAsFormat2) {
  RegionRecord record = Sample();
  record.info.export_access = core::RemoteAccess::kRead;
  record.info.export_allow = {{"10.0.0.0/8", 1000u},
                              {"cert:node-b.example", std::nullopt},
                              {"*", 0u}};
  const std::string text = EncodeRegionRecord(record);
  EXPECT_THAT(text, HasSubstr("rdmad-region-record 2\n"));
  EXPECT_THAT(text, HasSubstr("allow 1000@10.0.0.0/8\n"));
  auto parsed = ParseRegionRecord(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->info.export_allow, record.info.export_allow);
  EXPECT_EQ(parsed->info.export_access, core::RemoteAccess::kRead);
  // Without a list it stays format 1, readable by older daemons.
  EXPECT_THAT(EncodeRegionRecord(Sample()),
              HasSubstr("rdmad-region-record 1\n"));
}

TEST(RegionRecordTest, DamagedAccessListsAreRefused) {
  RegionRecord record = Sample();
  record.info.export_access = core::RemoteAccess::kRead;
  record.info.export_allow = {{"10.0.0.2", std::nullopt}};
  const std::string good = Body(record);
  for (const auto& [from, to] :
       std::vector<std::pair<std::string, std::string>>{
           {"allow 10.0.0.2", "allow 10.0.0.999"},
           {"allow 10.0.0.2", "allow x@10.0.0.2"},
           {"allow 10.0.0.2", "allow "},
           {"allow 10.0.0.2", "allowed 10.0.0.2"},
           {"rdmad-region-record 2", "rdmad-region-record 1"}}) {
    const std::string body = absl::StrReplaceAll(good, {{from, to}});
    auto parsed = ParseRegionRecord(WithChecksum(body));
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << to;
  }
  // Format 2 with no list line at all is damage too.
  const std::string bare = absl::StrReplaceAll(
      Body(Sample()),
      {{"rdmad-region-record 1", "rdmad-region-record 2"}});
  EXPECT_EQ(ParseRegionRecord(WithChecksum(bare)).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(RegionRecordTest, NotARecordAtAll) {
  for (const std::string& text :
       {std::string(""), std::string("\n"), std::string("hello\n"),
        std::string(5000, 'x') + "\n", std::string("\0\0\0\n", 4)}) {
    auto parsed = ParseRegionRecord(text);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
  }
}

TEST(RegionRecordTest, Slots) {
  const std::string a = NewSlot();
  const std::string b = NewSlot();
  EXPECT_TRUE(IsValidSlot(a)) << a;
  EXPECT_NE(a, b);
  EXPECT_FALSE(IsValidSlot("5f0c2a7e91d3b84"));
  EXPECT_FALSE(IsValidSlot("5f0c2a7e91d3b84g"));
  EXPECT_FALSE(IsValidSlot("../../etc/passwd"));
}

}  // namespace
}  // namespace rdmad::state
