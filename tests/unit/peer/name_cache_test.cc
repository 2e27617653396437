// NameCache against a fake connector and fake timers: coalescing of
// look-ups, entries bound to the incarnation they were resolved under,
// invalidation, deadlines and the bound on entries.
#include "daemon/peer/name_cache.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/peer_fakes.h"

namespace rdmad::peer {
namespace {

using ::testing::HasSubstr;
using testing::FakeConnector;
using testing::FakeTimers;
using testing::Region;

using testing::kPeer;

class NameCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeConnector::Remote remote;
    remote.regions["kv"] =
        Region(7, "kv", 4096, core::RemoteAccess::kReadWrite, 0x1234);
    connector_.SetRemote(kPeer, remote);
  }

  absl::StatusOr<ResolvedRegion> LookupNow(const std::string& name,
                                           uint64_t incarnation = 1) {
    std::optional<absl::StatusOr<ResolvedRegion>> out;
    cache_->Lookup(name, 1000, incarnation, timers_.Now() + absl::Seconds(5),
                   [&](absl::StatusOr<ResolvedRegion> r) { out = std::move(r); });
    EXPECT_TRUE(out.has_value());
    return out.has_value()
               ? *std::move(out)
               : absl::StatusOr<ResolvedRegion>(absl::InternalError("none"));
  }

  FakeTimers timers_;
  FakeConnector connector_;
  std::shared_ptr<NameCache> cache_ =
      std::make_shared<NameCache>(kPeer, &connector_, &timers_);
};

TEST_F(NameCacheTest, ResolvesOnceThenAnswersFromTheCache) {
  EXPECT_EQ(cache_->Find("kv", 1000, 1), nullptr);
  auto first = LookupNow("kv");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->region_id, 7u);
  EXPECT_EQ((*first)->peer, kPeer);
  EXPECT_EQ(connector_.last_uid(), 1000u) << "the caller's uid is asserted";
  auto second = LookupNow("kv");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, *first);
  EXPECT_EQ(cache_->Find("kv", 1000, 1), *first);
  EXPECT_EQ(connector_.resolves(kPeer), 1);
}

TEST_F(NameCacheTest, LookupsOfOneNameShareOneResolve) {
  connector_.set_hold_resolve(true);
  std::vector<absl::StatusOr<ResolvedRegion>> out;
  for (int i = 0; i < 5; ++i) {
    cache_->Lookup("kv", 1000, 1, timers_.Now() + absl::Seconds(5),
                   [&](absl::StatusOr<ResolvedRegion> r) {
                     out.push_back(std::move(r));
                   });
  }
  EXPECT_EQ(connector_.resolves(kPeer), 1);
  EXPECT_TRUE(out.empty());
  connector_.ReleaseResolves();
  ASSERT_EQ(out.size(), 5u);
  for (const auto& r : out) {
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, *out[0]);
  }
  EXPECT_EQ(timers_.pending(), 0u);
}

TEST_F(NameCacheTest, EntriesAnswerOnlyForTheirIncarnation) {
  ASSERT_TRUE(LookupNow("kv").ok());
  // The peer restarted: what it said before means nothing now.
  connector_.remote(kPeer).incarnation = 2;
  EXPECT_EQ(cache_->Find("kv", 1000, 2), nullptr);
  auto fresh = LookupNow("kv", 2);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->incarnation, 2u);
  EXPECT_EQ(connector_.resolves(kPeer), 2);
}

TEST_F(NameCacheTest, AnAnswerFromAnotherRunIsUnavailableAndNotCached) {
  connector_.remote(kPeer).incarnation = 3;  // restarted since our Hello
  auto r = LookupNow("kv", 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("restarted"));
  EXPECT_EQ(cache_->size(), 0u);
}

TEST_F(NameCacheTest, ErrorsAreNotCached) {
  auto missing = LookupNow("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  LookupNow("nope").IgnoreError();
  EXPECT_EQ(connector_.resolves(kPeer), 2);
}

TEST_F(NameCacheTest, EachUidResolvesForItself) {
  // The exporter's access list may admit one uid and not another: an entry
  // resolved for uid 1000 never answers for uid 2000.
  ASSERT_TRUE(LookupNow("kv").ok());
  EXPECT_EQ(cache_->Find("kv", 2000, 1), nullptr);
  std::optional<absl::StatusOr<ResolvedRegion>> other;
  cache_->Lookup("kv", 2000, 1, timers_.Now() + absl::Seconds(5),
                 [&](absl::StatusOr<ResolvedRegion> r) { other = std::move(r); });
  ASSERT_TRUE(other.has_value());
  ASSERT_TRUE(other->ok()) << other->status();
  EXPECT_EQ(connector_.resolves(kPeer), 2);
  EXPECT_EQ(connector_.last_uid(), 2000u);
  // A stale key is stale for everyone.
  cache_->Invalidate("kv");
  EXPECT_EQ(cache_->Find("kv", 1000, 1), nullptr);
  EXPECT_EQ(cache_->Find("kv", 2000, 1), nullptr);
}

TEST_F(NameCacheTest, InvalidateDropsTheName) {
  ASSERT_TRUE(LookupNow("kv").ok());
  cache_->Invalidate("kv");
  EXPECT_EQ(cache_->Find("kv", 1000, 1), nullptr);
  ASSERT_TRUE(LookupNow("kv").ok());
  EXPECT_EQ(connector_.resolves(kPeer), 2);
}

TEST_F(NameCacheTest, WaitersFailAtTheirDeadlineAndTheAnswerStillFillsTheCache) {
  connector_.set_hold_resolve(true);
  std::optional<absl::StatusOr<ResolvedRegion>> out;
  cache_->Lookup("kv", 1000, 1, timers_.Now() + absl::Seconds(1),
                 [&](absl::StatusOr<ResolvedRegion> r) { out = std::move(r); });
  timers_.Advance(absl::Seconds(2));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(out->status().message(), HasSubstr("'kv'"));
  connector_.ReleaseResolves();
  EXPECT_NE(cache_->Find("kv", 1000, 1), nullptr);
}

TEST_F(NameCacheTest, EntriesAreBounded) {
  FakeConnector::Remote& remote = connector_.remote(kPeer);
  const size_t n = NameCache::kMaxEntries + 10;
  for (size_t i = 0; i < n; ++i) {
    const std::string name = absl::StrCat("r", i);
    remote.regions[name] =
        Region(i + 1, name, 64, core::RemoteAccess::kRead, i + 1);
  }
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(LookupNow(absl::StrCat("r", i)).ok());
  }
  EXPECT_EQ(cache_->size(), NameCache::kMaxEntries);
  EXPECT_EQ(cache_->Find("r0", 1000, 1), nullptr) << "the oldest went first";
  EXPECT_NE(cache_->Find(absl::StrCat("r", n - 1), 1000, 1), nullptr);
}

}  // namespace
}  // namespace rdmad::peer
