#include "daemon/directory/region_cache.h"

#include "gtest/gtest.h"

namespace rdmad::directory {
namespace {

core::DirectoryEntry Entry(const std::string& name, const std::string& node,
                           int64_t revision) {
  core::DirectoryEntry e;
  e.name = name;
  e.node = node;
  e.size = 4096;
  e.access = core::RemoteAccess::kReadWrite;
  e.region_id = 1;
  e.generation = {7, revision};
  return e;
}

TEST(RegionCacheTest, ResetThenWatchEvents) {
  RegionCache cache;
  EXPECT_FALSE(cache.live());
  cache.Reset({Entry("a", "n1:1", 5), Entry("b", "n1:1", 6)}, 10);
  EXPECT_TRUE(cache.live());
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.revision(), 10);
  cache.ApplyPut(Entry("a", "n2:1", 11));  // moved
  EXPECT_EQ(cache.Find("a")->node, "n2:1");
  cache.ApplyDelete("b", 12);
  EXPECT_FALSE(cache.Find("b").has_value());
  EXPECT_EQ(cache.revision(), 12);
}

TEST(RegionCacheTest, OlderEventsNeverWin) {
  RegionCache cache;
  cache.Reset({Entry("a", "new:1", 20)}, 20);
  cache.ApplyPut(Entry("a", "old:1", 15));
  EXPECT_EQ(cache.Find("a")->node, "new:1");
  cache.ApplyDelete("a", 19);  // a delete before the current entry
  EXPECT_TRUE(cache.Find("a").has_value());
  cache.ApplyDelete("a", 21);
  EXPECT_FALSE(cache.Find("a").has_value());
}

TEST(RegionCacheTest, DirectReadsOnlyWhenNewerThanTheWatch) {
  RegionCache cache;
  cache.Reset({}, 10);
  // A read at 8 (older than what the watch applied) adds nothing.
  cache.Offer("a", Entry("a", "n1:1", 7), 8);
  EXPECT_FALSE(cache.Find("a").has_value());
  // A read at 12 does.
  cache.Offer("a", Entry("a", "n1:1", 11), 12);
  ASSERT_TRUE(cache.Find("a").has_value());
  // The watch then delivers the delete that happened at 13.
  cache.ApplyDelete("a", 13);
  EXPECT_FALSE(cache.Find("a").has_value());
  // A slow read taken before that delete cannot bring it back.
  cache.Offer("a", Entry("a", "n1:1", 11), 12);
  EXPECT_FALSE(cache.Find("a").has_value());
}

TEST(RegionCacheTest, DirectReadOfNothingDropsAStaleEntry) {
  RegionCache cache;
  cache.Reset({Entry("a", "n1:1", 5)}, 10);
  cache.SetLive(false);  // watch lost: the delete never came
  cache.Offer("a", std::nullopt, 30);
  EXPECT_FALSE(cache.Find("a").has_value());
  EXPECT_FALSE(cache.live());
}

TEST(RegionCacheTest, EntriesOutliveTheWatch) {
  RegionCache cache;
  cache.Reset({Entry("a", "n1:1", 5)}, 10);
  cache.SetLive(false);
  EXPECT_TRUE(cache.Find("a").has_value());  // still answers
}

}  // namespace
}  // namespace rdmad::directory
