#include "daemon/directory/directory_keys.h"

#include "common/directory_url.h"
#include "gtest/gtest.h"

namespace rdmad::directory {
namespace {

TEST(DirectoryKeysTest, Layout) {
  DirectoryKeys keys("/rdmad");
  EXPECT_EQ(keys.Region("kv/shard-7"), "/rdmad/regions/kv/shard-7");
  EXPECT_EQ(keys.Node("10.0.0.1:7471"), "/rdmad/nodes/10.0.0.1:7471");
  EXPECT_EQ(keys.RegionsPrefix(), "/rdmad/regions/");
}

TEST(DirectoryKeysTest, RegionNameOnlyForValidRegionKeys) {
  DirectoryKeys keys("/rdmad");
  EXPECT_EQ(keys.RegionName("/rdmad/regions/kv/shard-7"), "kv/shard-7");
  EXPECT_FALSE(keys.RegionName("/rdmad/nodes/10.0.0.1:7471").has_value());
  EXPECT_FALSE(keys.RegionName("/other/regions/kv").has_value());
  EXPECT_FALSE(keys.RegionName("/rdmad/regions/").has_value());
  // Written by something else under our prefix: not a region name.
  EXPECT_FALSE(keys.RegionName("/rdmad/regions/a//b").has_value());
  EXPECT_FALSE(keys.RegionName("/rdmad/regions/../x").has_value());
  EXPECT_FALSE(keys.RegionName("/rdmad/regions/a b").has_value());
}

TEST(DirectoryKeysTest, RangeEndCoversExactlyThePrefix) {
  EXPECT_EQ(RangeEnd("/rdmad/regions/"), "/rdmad/regions0");
  EXPECT_EQ(RangeEnd("a"), "b");
  EXPECT_EQ(RangeEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(RangeEnd(std::string("\xff\xff", 2)), std::string(1, '\0'));
  const std::string prefix = "/rdmad/regions/kv/";
  const std::string end = RangeEnd(prefix);
  EXPECT_LT(prefix + "zzz", end);
  EXPECT_GE("/rdmad/regions/kw", end);
}

TEST(DirectoryUrlTest, ParsesEndpoints) {
  auto one = ParseDirectoryUrl("etcd://127.0.0.1:2379");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(*one, std::vector<std::string>{"127.0.0.1:2379"});
  auto many = ParseDirectoryUrl("etcd://a.example:2379,[::1]:2379");
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_EQ(many->size(), 2u);
  for (const char* bad :
       {"", "127.0.0.1:2379", "http://127.0.0.1:2379", "etcd://",
        "etcd://host", "etcd://host:0", "etcd://a:1,,b:2", "etcd://a:1,"}) {
    EXPECT_FALSE(ParseDirectoryUrl(bad).ok()) << bad;
  }
}

TEST(DirectoryUrlTest, Prefixes) {
  EXPECT_TRUE(ValidateDirectoryPrefix("/rdmad").ok());
  EXPECT_TRUE(ValidateDirectoryPrefix("/").ok());
  EXPECT_TRUE(ValidateDirectoryPrefix("/clusters/prod").ok());
  for (const char* bad : {"", "rdmad", "/rdmad/", "/a b", "/a\tb"}) {
    EXPECT_FALSE(ValidateDirectoryPrefix(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace rdmad::directory
