#include "common/region_address.h"

#include <string>

#include "gtest/gtest.h"

namespace rdmad {
namespace {

TEST(RegionAddressTest, LocalName) {
  auto a = ParseRegionAddress("cache");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->peer, "");
  EXPECT_EQ(a->name, "cache");
  EXPECT_EQ(a->offset, 0u);
  EXPECT_FALSE(a->is_remote());
}

TEST(RegionAddressTest, LocalWithOffset) {
  auto a = ParseRegionAddress("kv.shard-1_a@4K");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->name, "kv.shard-1_a");
  EXPECT_EQ(a->offset, 4096u);
}

TEST(RegionAddressTest, RemoteIpv4) {
  auto a = ParseRegionAddress("10.0.0.2:7471/cache@1M");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->peer, "10.0.0.2:7471");
  EXPECT_EQ(a->name, "cache");
  EXPECT_EQ(a->offset, 1u << 20);
  EXPECT_TRUE(a->is_remote());
}

TEST(RegionAddressTest, RemoteHostnameAndIpv6) {
  auto a = ParseRegionAddress("node7.example:7471/r");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->peer, "node7.example:7471");
  auto b = ParseRegionAddress("[::1]:7471/r@7");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->peer, "[::1]:7471");
  EXPECT_EQ(b->offset, 7u);
}

TEST(RegionAddressTest, NameWithSlashesHasNoPeer) {
  auto a = ParseRegionAddress("kv/shard-7@4K");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->peer, "");
  EXPECT_EQ(a->name, "kv/shard-7");
  EXPECT_EQ(a->offset, 4096u);
  auto b = ParseRegionAddress("10.0.0.2:7471/kv/shard-7");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->peer, "10.0.0.2:7471");
  EXPECT_EQ(b->name, "kv/shard-7");
}

TEST(RegionAddressTest, Rejects) {
  for (const char* bad :
       {"", "@4K", "name@", "name@-1", "name@4X", "/name", "host/", "a//b", "a/.b", "a/-b",
        "host:0/name", "host:65536/name", "host:port/name", "::1:7471/name",
        "[::1/name", "10.0.0.1:7471/a/", "na me", ".hidden", "-dash", "x@1@2",
        "10.0.0.1:7471/", "name@99999999999999999999999"}) {
    auto a = ParseRegionAddress(bad);
    EXPECT_FALSE(a.ok()) << "'" << bad << "' parsed as " << a->peer << " / "
                         << a->name;
    if (!a.ok()) {
      EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    }
  }
}

TEST(RegionNameTest, Limits) {
  EXPECT_TRUE(ValidateRegionName(std::string(kMaxRegionNameLength, 'a')).ok());
  EXPECT_FALSE(
      ValidateRegionName(std::string(kMaxRegionNameLength + 1, 'a')).ok());
  EXPECT_TRUE(ValidateRegionName("a/b").ok());
  EXPECT_TRUE(ValidateRegionName("kv/shard-7/v.2").ok());
  EXPECT_FALSE(ValidateRegionName("a/").ok());
  EXPECT_FALSE(ValidateRegionName("a/../b").ok());
  EXPECT_FALSE(ValidateRegionName("a:b").ok());
  EXPECT_FALSE(ValidateRegionName("a@b").ok());
  EXPECT_FALSE(ValidateRegionName(std::string("a\0b", 3)).ok());
}

TEST(PeerAddressTest, ListenAddressMayUsePortZero) {
  EXPECT_FALSE(ValidatePeerAddress("127.0.0.1:0").ok());
  EXPECT_TRUE(ValidatePeerAddress("127.0.0.1:0", true).ok());
  EXPECT_TRUE(ValidatePeerAddress("[::]:7471", true).ok());
}

}  // namespace
}  // namespace rdmad
