#include "common/region_address.h"

#include <string>
#include <vector>

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

// Hosts are IPv4 addresses, bracketed IPv6 addresses or DNS names, and
// nothing else: no spaces, NULs, oversized names or signed ports.
TEST(PeerAddressTest, HostsAndPortsAreValidated) {
  std::string long_name(253, 'a');
  for (size_t dot : {63, 127, 191}) long_name[dot] = '.';
  const std::vector<std::string> good = {
      "10.0.0.2:7471", "node-7.example:1",    "a_b.svc:65535",
      "[::1]:7471",    "[fe80::1%eth0]:7471", std::string(63, 'a') + ".b:1",
      long_name + ":1"};
  for (const std::string& address : good) {
    EXPECT_TRUE(ValidatePeerAddress(address).ok()) << address;
  }
  const std::vector<std::string> bad = {std::string("127.0.0.1\0:7471", 15),
                                        std::string("127.0.0.1:74\0"
                                                    "71",
                                                    15),
                                        " 127.0.0.1:7471",
                                        "127.0.0.1 :7471",
                                        "a b:7471",
                                        "127.0.0.1:+80",
                                        "127.0.0.1: 80",
                                        "127.0.0.1:080000",
                                        std::string(64, 'a') + ".b:1",
                                        std::string(10000, 'a') + ":7471",
                                        long_name + "a:1",
                                        "a..b:1",
                                        ".a:1",
                                        "-a:1",
                                        "a-:1",
                                        "[::g]:1",
                                        "[1.2.3.4]:1",
                                        "[::1%]:1",
                                        "host\n:1",
                                        "h\xc3\xa9:1"};
  for (const std::string& address : bad) {
    auto status = ValidatePeerAddress(address);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << address;
    // What is quoted back is escaped and short.
    EXPECT_EQ(status.message().find('\0'), absl::string_view::npos);
    EXPECT_LT(status.message().size(), 400u);
  }
}

TEST(PeerAddressTest, ListenAddressMayUsePortZero) {
  EXPECT_FALSE(ValidatePeerAddress("127.0.0.1:0").ok());
  EXPECT_TRUE(ValidatePeerAddress("127.0.0.1:0", true).ok());
  EXPECT_TRUE(ValidatePeerAddress("[::]:7471", true).ok());
}

}  // namespace
}  // namespace rdmad
