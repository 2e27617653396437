#include "daemon/directory/directory_record.h"

#include "gtest/gtest.h"

namespace rdmad::directory {
namespace {

v1::DirectoryRegionRecord Record() {
  v1::DirectoryRegionRecord r;
  r.set_name("kv/shard-7");
  r.set_node("10.0.0.2:7471");
  r.set_size(4096);
  r.set_access(v1::ACCESS_READ_WRITE);
  r.set_region_id(9);
  r.set_incarnation(0xabcdef);
  r.set_exported_unix_ms(1700000000000);
  return r;
}

TEST(DirectoryRecordTest, RoundTripsAsJson) {
  const std::string value = EncodeRegionRecord(Record());
  EXPECT_NE(value.find("\"node\":\"10.0.0.2:7471\""), std::string::npos)
      << value;
  auto back = DecodeRegionRecord("kv/shard-7", value);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), Record().SerializeAsString());
}

TEST(DirectoryRecordTest, ToEntryCarriesTheGeneration) {
  const core::DirectoryEntry e = ToEntry(Record(), 40, 42);
  EXPECT_EQ(e.name, "kv/shard-7");
  EXPECT_EQ(e.node, "10.0.0.2:7471");
  EXPECT_EQ(e.access, core::RemoteAccess::kReadWrite);
  EXPECT_EQ(e.region_id, 9u);
  EXPECT_EQ(e.generation, (core::DirectoryGeneration{0xabcdef, 42}));
  EXPECT_EQ(e.create_revision, 40);
}

TEST(DirectoryRecordTest, IgnoresUnknownFieldsFromNewerWriters) {
  std::string value = EncodeRegionRecord(Record());
  value.insert(1, "\"future_field\":1,");
  EXPECT_TRUE(DecodeRegionRecord("kv/shard-7", value).ok());
}

TEST(DirectoryRecordTest, RejectsWhatRdmadWouldNotWrite) {
  auto check = [](auto mutate, const char* why) {
    v1::DirectoryRegionRecord r = Record();
    mutate(r);
    EXPECT_FALSE(DecodeRegionRecord("kv/shard-7", EncodeRegionRecord(r)).ok())
        << why;
  };
  check([](auto& r) { r.set_name("other"); }, "name differs from the key");
  check([](auto& r) { r.set_node("no-port"); }, "node without a port");
  check([](auto& r) { r.set_node(""); }, "no node");
  check([](auto& r) { r.set_access(v1::ACCESS_NONE); }, "not exported");
  check([](auto& r) { r.set_size(0); }, "no size");
  check([](auto& r) { r.set_incarnation(0); }, "no incarnation");
  check([](auto& r) { r.set_region_id(0); }, "no region id");
  EXPECT_FALSE(DecodeRegionRecord("kv/shard-7", "not json").ok());
  EXPECT_FALSE(DecodeRegionRecord("kv/shard-7", "").ok());
  EXPECT_FALSE(
      DecodeRegionRecord("kv/shard-7", std::string(kMaxRecordBytes + 1, ' '))
          .ok());
  EXPECT_FALSE(DecodeRegionRecord("kv/shard-7", "{\"access\":99}").ok());
}

}  // namespace
}  // namespace rdmad::directory
