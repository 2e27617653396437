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
  e.lease = 0x1ea5e;
  e.holder_ttl = absl::Seconds(3);
  return e;
}

// A clock the test moves.
struct TestClock {
  absl::Time now = absl::FromUnixSeconds(1000);
  RegionCache::Clock fn() {
    return [this] { return now; };
  }
};

TEST(RegionCacheTest, ResetThenWatchEvents) {
  RegionCache cache;
  EXPECT_FALSE(cache.live());
  cache.Reset({Entry("a", "n1:1", 5), Entry("b", "n1:1", 6)}, 10);
  EXPECT_TRUE(cache.live());
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.revision(), 10);
  cache.ApplyPut(Entry("a", "n2:1", 11));  // moved
  EXPECT_EQ(cache.Find("a")->node, "n2:1");
  const int64_t lease = cache.ApplyDelete("b", 12);
  EXPECT_EQ(lease, 0x1ea5e);
  cache.DropVanished("b", lease);  // etcd: that lease has ended
  EXPECT_FALSE(cache.Find("b").has_value());
  EXPECT_EQ(cache.revision(), 12);
}

TEST(RegionCacheTest, OlderEventsNeverWin) {
  RegionCache cache;
  cache.Reset({Entry("a", "new:1", 20)}, 20);
  cache.ApplyPut(Entry("a", "old:1", 15));
  EXPECT_EQ(cache.Find("a")->node, "new:1");
  EXPECT_EQ(cache.ApplyDelete("a", 19), 0);  // before the current entry
  cache.DropVanished("a", 0x1ea5e);
  EXPECT_EQ(cache.Find("a")->node, "new:1");
  EXPECT_NE(cache.ApplyDelete("a", 21), 0);
  cache.DropVanished("a", 0x1ea5e);
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
  // The watch then delivers the delete that happened at 13, and the
  // holder's lease is gone.
  cache.DropVanished("a", cache.ApplyDelete("a", 13));
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

// etcd restored empty after an outage: the holder has not re-published
// yet, so its entry keeps answering; its new entry replaces it although the
// new store's revisions start again from 1.
TEST(RegionCacheTest,
     AnEntryMissingAfterAnOutageKeepsAnsweringUntilRepublished) {
  TestClock clock;
  RegionCache cache(absl::Seconds(10), clock.fn());
  cache.Reset({Entry("a", "n1:1", 40)}, 50);
  cache.SetLive(false);
  cache.Reset({}, 1);  // the new, empty store
  ASSERT_TRUE(cache.Find("a").has_value());
  EXPECT_EQ(cache.Find("a")->node, "n1:1");
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.revision(), 1);
  // A read of nothing does not drop it: the holder may still publish.
  cache.Offer("a", std::nullopt, 2);
  EXPECT_TRUE(cache.Find("a").has_value());
  cache.ApplyPut(Entry("a", "n1:1", 3));  // re-published, revision 3
  ASSERT_TRUE(cache.Find("a").has_value());
  EXPECT_EQ(cache.Find("a")->generation.revision, 3);
  // No longer vanished: an older event cannot replace it now.
  cache.ApplyPut(Entry("a", "old:1", 2));
  EXPECT_EQ(cache.Find("a")->node, "n1:1");
}

// A holder that never comes back: its entry goes once its lease TTL (as
// its record states it) and the slack have passed.
TEST(RegionCacheTest, AVanishedEntryGoesAfterTheHoldersTtl) {
  TestClock clock;
  RegionCache cache(absl::Seconds(10), clock.fn());
  cache.Reset({Entry("a", "n1:1", 40)}, 50);
  cache.Reset({}, 1);
  clock.now +=
      absl::Seconds(3) + RegionCache::kVanishedSlack - absl::Milliseconds(1);
  EXPECT_TRUE(cache.Find("a").has_value());
  clock.now += absl::Milliseconds(1);
  EXPECT_FALSE(cache.Find("a").has_value());
  EXPECT_EQ(cache.size(), 0u);
  // A record that states no TTL gets the default one.
  core::DirectoryEntry no_ttl = Entry("b", "n1:1", 5);
  no_ttl.holder_ttl = absl::ZeroDuration();
  cache.ApplyPut(no_ttl);
  cache.ApplyDelete("b", 6);
  clock.now +=
      absl::Seconds(10) + RegionCache::kVanishedSlack - absl::Milliseconds(1);
  EXPECT_TRUE(cache.Find("b").has_value());
  clock.now += absl::Milliseconds(1);
  EXPECT_FALSE(cache.Find("b").has_value());
}

// A key deleted while its holder's lease lives (someone else deleted it):
// kept; dropped only when etcd says the lease it hung on has ended.
TEST(RegionCacheTest, ADeletedEntryGoesWhenItsLeaseHasEnded) {
  TestClock clock;
  RegionCache cache(absl::Seconds(10), clock.fn());
  cache.Reset({Entry("a", "n1:1", 5)}, 10);
  const int64_t lease = cache.ApplyDelete("a", 11);
  ASSERT_EQ(lease, 0x1ea5e);
  EXPECT_TRUE(cache.Find("a").has_value());
  EXPECT_EQ(cache.ApplyDelete("a", 12), 0) << "already vanished";
  cache.DropVanished("a", lease + 1);  // another lease: not this entry's
  EXPECT_TRUE(cache.Find("a").has_value());
  // Re-published before the answer came: the answer about the old lease
  // does not drop the new entry.
  cache.ApplyPut(Entry("a", "n1:1", 13));
  cache.DropVanished("a", lease);
  EXPECT_TRUE(cache.Find("a").has_value());
  cache.DropVanished("a", cache.ApplyDelete("a", 14));
  EXPECT_FALSE(cache.Find("a").has_value());
}

}  // namespace
}  // namespace rdmad::directory
