#include "daemon/core/region_table.h"

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::core {
namespace {

using ::testing::HasSubstr;

// Records registrations so tests can see what the table asked for and
// whether it deregistered (revoked) them.
class FakeRegistrar final : public MemoryRegistrar {
 public:
  class FakeRegistration final : public Registration {
   public:
    FakeRegistration(FakeRegistrar* owner, uint32_t key) : owner_(owner) {
      keys_.push_back({"fake0", key, key + 1000});
    }
    ~FakeRegistration() override {
      absl::MutexLock lock(&owner_->mu_);
      ++owner_->deregistered_;
    }
    const std::vector<DeviceRegistration>& keys() const override { return keys_; }

   private:
    FakeRegistrar* owner_;
    std::vector<DeviceRegistration> keys_;
  };

  absl::StatusOr<std::unique_ptr<Registration>> Register(
      void* addr, size_t length, RemoteAccess remote) override {
    absl::MutexLock lock(&mu_);
    if (fail_next_) {
      fail_next_ = false;
      return absl::ResourceExhaustedError("ibv_reg_mr: out of memory");
    }
    EXPECT_NE(addr, nullptr);
    EXPECT_GT(length, 0u);
    last_access_ = remote;
    return std::make_unique<FakeRegistration>(this, ++registered_);
  }

  int registered() const {
    absl::MutexLock lock(&mu_);
    return registered_;
  }
  int deregistered() const {
    absl::MutexLock lock(&mu_);
    return deregistered_;
  }
  void FailNext() {
    absl::MutexLock lock(&mu_);
    fail_next_ = true;
  }

 private:
  mutable absl::Mutex mu_;
  int registered_ = 0;
  int deregistered_ = 0;
  bool fail_next_ = false;
  RemoteAccess last_access_ = RemoteAccess::kNone;
};

constexpr Caller kAlice{1, 1000, 1000, 11};
constexpr Caller kAliceOtherSession{2, 1000, 1000, 12};
constexpr Caller kBob{3, 1001, 1001, 13};
constexpr Caller kRoot{4, 0, 0, 14};

class RegionTableTest : public ::testing::Test {
 protected:
  AllocateOptions Named(std::string name, uint64_t size, bool daemon = true) {
    AllocateOptions o;
    o.name = std::move(name);
    o.size = size;
    o.daemon_owned = daemon;
    return o;
  }

  FakeRegistrar registrar_;
  RegionTable table_{&registrar_,
                     RegionLimits{64 << 20, 1ull << 30, 0, 0,
                                  "the daemon's locked-memory limit"}};
};

TEST_F(RegionTableTest, AllocateMapsZeroedSharedMemoryAndRegisters) {
  auto r = table_.Allocate(kAlice, Named("a", 10000));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->size(), 10000u);
  EXPECT_GE((*r)->mapped_size(), 10000u);
  EXPECT_GE((*r)->fd(), 0);
  for (uint64_t i = 0; i < (*r)->size(); ++i) ASSERT_EQ((*r)->data()[i], 0);
  std::memset((*r)->data(), 0xab, (*r)->size());
  EXPECT_EQ(registrar_.registered(), 1);
  const RegionSnapshot s = (*r)->Snapshot();
  EXPECT_EQ(s.owner, RegionOwnerKind::kDaemon);
  EXPECT_EQ(s.owner_uid, 1000u);
  ASSERT_EQ(s.local_keys.size(), 1u);
  EXPECT_EQ(s.exported.access, RemoteAccess::kNone);
  EXPECT_EQ(s.exported.tcp_key, 0u);
}

TEST_F(RegionTableTest, RejectsBadSizesAndNames) {
  EXPECT_EQ(table_.Allocate(kAlice, Named("z", 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_.Allocate(kAlice, Named("huge", 2ull << 30)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_.Allocate(kAlice, Named("max", ~0ull)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_.Allocate(kAlice, Named("bad/name", 10)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_.Allocate(kAlice, Named("", 10)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_.Totals().count, 0u);
}

TEST_F(RegionTableTest, SessionBufferNeedsSession) {
  Caller anonymous{0, 1000, 1000, 1};
  EXPECT_EQ(table_.Allocate(anonymous, Named("", 10, false)).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST_F(RegionTableTest, DuplicateNameIsAlreadyExists) {
  ASSERT_TRUE(table_.Allocate(kAlice, Named("dup", 10)).ok());
  auto again = table_.Allocate(kBob, Named("dup", 10));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr("dup"));
}

TEST_F(RegionTableTest, PinnedLimitIsResourceExhausted) {
  ASSERT_TRUE(table_.Allocate(kAlice, Named("a", 40 << 20)).ok());
  auto over = table_.Allocate(kAlice, Named("b", 30 << 20));
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  // Names the cap by its config field, why it is what it is, and the sizes
  // in units people read.
  EXPECT_THAT(over.status().message(),
              HasSubstr("allocating 30 MiB would bring all regions to 70 MiB, "
                        "over max_pinned_bytes of 64 MiB (the daemon's "
                        "locked-memory limit), with 40 MiB in use"));
  // Freeing makes room again.
  ASSERT_TRUE(table_.Free(kAlice, {0, "a"}).ok());
  EXPECT_TRUE(table_.Allocate(kAlice, Named("b", 30 << 20)).ok());
}

TEST_F(RegionTableTest, RegistrationFailureLeavesNothingBehind) {
  registrar_.FailNext();
  auto r = table_.Allocate(kAlice, Named("a", 4096));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(table_.Totals().count, 0u);
  EXPECT_EQ(table_.Totals().pinned_bytes, 0u);
  EXPECT_TRUE(table_.Allocate(kAlice, Named("a", 4096)).ok());
}

TEST_F(RegionTableTest, OwnershipRules) {
  auto mine = table_.Allocate(kAlice, Named("", 100, false));
  ASSERT_TRUE(mine.ok());
  const RegionKey key{(*mine)->id(), ""};
  // Another session of the same user may not touch a session buffer.
  EXPECT_EQ(table_.FindForUse(kAliceOtherSession, key).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(table_.Free(kBob, key).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(table_.FindForUse(kAlice, key).ok());

  ASSERT_TRUE(table_.Allocate(kAlice, Named("shared", 100)).ok());
  // Named regions: same uid from any session, or root.
  EXPECT_TRUE(table_.FindForUse(kAliceOtherSession, {0, "shared"}).ok());
  EXPECT_TRUE(table_.FindForUse(kRoot, {0, "shared"}).ok());
  EXPECT_EQ(table_.FindForUse(kBob, {0, "shared"}).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(table_.Free(kBob, {0, "shared"}).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(table_.Free(kRoot, {0, "shared"}).ok());
}

TEST_F(RegionTableTest, UnknownAndFreedRegionsAreNotFound) {
  EXPECT_EQ(table_.Free(kAlice, {0, "nope"}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(table_.Free(kAlice, {12345, ""}).code(),
            absl::StatusCode::kNotFound);
  auto r = table_.Allocate(kAlice, Named("x", 10));
  ASSERT_TRUE(r.ok());
  const uint64_t id = (*r)->id();
  ASSERT_TRUE(table_.Free(kAlice, {id, ""}).ok());
  EXPECT_EQ(table_.Free(kAlice, {id, ""}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table_.FindForUse(kAlice, {0, "x"}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RegionTableTest, ExportGrantsAndRevokes) {
  ASSERT_TRUE(table_.Allocate(kAlice, Named("e", 4096)).ok());
  EXPECT_EQ(table_.FindExported("e").status().code(),
            absl::StatusCode::kNotFound);
  auto exported = table_.Export(kAlice, {0, "e"}, RemoteAccess::kRead);
  ASSERT_TRUE(exported.ok()) << exported.status();
  const ExportState first = (*exported)->exported();
  EXPECT_EQ(first.access, RemoteAccess::kRead);
  EXPECT_NE(first.tcp_key, 0u);
  ASSERT_EQ(first.keys.size(), 1u);
  EXPECT_TRUE(table_.FindExported("e").ok());

  // Re-export: new key, old registration deregistered.
  const int deregistered = registrar_.deregistered();
  auto again = table_.Export(kAlice, {0, "e"}, RemoteAccess::kReadWrite);
  ASSERT_TRUE(again.ok());
  EXPECT_NE((*again)->exported().tcp_key, first.tcp_key);
  EXPECT_EQ(registrar_.deregistered(), deregistered + 1);

  // Unexport revokes.
  ASSERT_TRUE(table_.Export(kAlice, {0, "e"}, RemoteAccess::kNone).ok());
  EXPECT_EQ(table_.FindExported("e").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ((*again)->exported().tcp_key, 0u);
  EXPECT_EQ(table_.Export(kBob, {0, "e"}, RemoteAccess::kRead).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(RegionTableTest, AnonymousBuffersCannotBeExported) {
  auto r = table_.Allocate(kAlice, Named("", 100, false));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(table_.Export(kAlice, {(*r)->id(), ""}, RemoteAccess::kRead)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(RegionTableTest, FreeRevokesEvenWhileMemoryIsHeld) {
  auto r = table_.Allocate(kAlice, Named("held", 4096));
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(table_.Export(kAlice, {0, "held"}, RemoteAccess::kWrite).ok());
  std::shared_ptr<Region> in_flight = *r;  // as a transfer would hold it
  ASSERT_TRUE(table_.Free(kAlice, {0, "held"}).ok());
  EXPECT_EQ(in_flight->exported().access, RemoteAccess::kNone);
  // Memory stays mapped for the holder.
  in_flight->data()[4095] = 1;
  EXPECT_EQ(table_.Totals().count, 0u);
  EXPECT_FALSE(table_.FindExported("held").ok());
}

TEST_F(RegionTableTest, FreeSessionFreesOnlyThatSessionsBuffers) {
  ASSERT_TRUE(table_.Allocate(kAlice, Named("", 100, false)).ok());
  ASSERT_TRUE(table_.Allocate(kAlice, Named("named-buf", 100, false)).ok());
  ASSERT_TRUE(table_.Allocate(kAlice, Named("kept", 100, true)).ok());
  ASSERT_TRUE(table_.Allocate(kBob, Named("", 100, false)).ok());
  EXPECT_EQ(table_.FreeSession(kAlice.session_id), 2u);
  EXPECT_EQ(table_.Totals().count, 2u);
  EXPECT_TRUE(table_.FindForUse(kAlice, {0, "kept"}).ok());
  // The name of a freed session buffer can be reused.
  EXPECT_TRUE(table_.Allocate(kBob, Named("named-buf", 100, false)).ok());
}

TEST_F(RegionTableTest, ConcurrentAllocateSameNameCreatesOne) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      if (table_.Allocate(kAlice, Named("race", 4096)).ok()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(table_.Totals().count, 1u);
}

TEST_F(RegionTableTest, TotalsAndListAreConsistent) {
  ASSERT_TRUE(table_.Allocate(kAlice, Named("a", 1000)).ok());
  ASSERT_TRUE(table_.Allocate(kAlice, Named("b", 5000)).ok());
  const RegionTotals totals = table_.Totals();
  EXPECT_EQ(totals.count, 2u);
  EXPECT_EQ(totals.bytes, 6000u);
  auto list = table_.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "a");
  EXPECT_EQ(list[1].name, "b");
  EXPECT_LT(list[0].id, list[1].id);
}

}  // namespace
}  // namespace rdmad::core

namespace rdmad::core {
namespace {

// chmod/chgrp of named regions: the owner or root, real groups, and the
// change applies to the next use.
TEST_F(RegionTableTest, SetPermissionsIsForOwnersOfNamedRegions) {
  ASSERT_TRUE(table_.Allocate(kAlice, Named("kv", 4096)).ok());
  // Bob may not use it (0600), nor change that.
  EXPECT_EQ(table_.FindForUse(kBob, {0, "kv"}, kLocalRead).status().code(),
            absl::StatusCode::kPermissionDenied);
  auto by_bob = table_.SetPermissions(kBob, {0, "kv"}, 0666, std::nullopt);
  EXPECT_EQ(by_bob.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(by_bob.status().message(), HasSubstr("only that user or root"));
  // The owner grants read to others: Bob reads, but does not write.
  auto opened = table_.SetPermissions(kAlice, {0, "kv"}, 0604, std::nullopt);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->acl().mode, 0604u);
  EXPECT_TRUE(table_.FindForUse(kBob, {0, "kv"}, kLocalRead).ok());
  EXPECT_FALSE(table_.FindForUse(kBob, {0, "kv"}, kLocalWrite).ok());
  // Mode 0 means 0 (unlike at creation), and the owner can undo it.
  ASSERT_TRUE(table_.SetPermissions(kAlice, {0, "kv"}, 0, std::nullopt).ok());
  EXPECT_FALSE(table_.FindForUse(kAlice, {0, "kv"}, kLocalRead).ok());
  ASSERT_TRUE(table_.SetPermissions(kAlice, {0, "kv"}, 0600, std::nullopt).ok());
  // Bad bits, nothing to change.
  EXPECT_EQ(table_.SetPermissions(kAlice, {0, "kv"}, 0700, std::nullopt)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_.SetPermissions(kAlice, {0, "kv"}, std::nullopt,
                                  std::nullopt)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Groups: one of the caller's; root may pick any.
  auto foreign = table_.SetPermissions(kAlice, {0, "kv"}, std::nullopt, 4242);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(foreign.status().message(), HasSubstr("not in group 4242"));
  Caller in_group = kAlice;
  in_group.groups = {4242};
  ASSERT_TRUE(table_.SetPermissions(in_group, {0, "kv"}, 0640, 4242).ok());
  auto by_root = table_.SetPermissions(kRoot, {0, "kv"}, std::nullopt, 77);
  ASSERT_TRUE(by_root.ok()) << by_root.status();
  EXPECT_EQ((*by_root)->acl().gid, 77u);
  EXPECT_EQ((*by_root)->acl().uid, kAlice.uid);  // the owner stays
  EXPECT_EQ((*by_root)->Snapshot().mode, 0640u);
  // Session buffers have no mode to change.
  auto buffer = table_.Allocate(kAlice, Named("buf", 4096, false));
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(table_.SetPermissions(kAlice, {0, "buf"}, 0644, std::nullopt)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(table_.SetPermissions(kAlice, {0, "nope"}, 0644, std::nullopt)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RegionTableTest, ListPagesInIdOrder) {
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(table_.Allocate(kAlice, Named(absl::StrCat("r", i), 64)).ok());
  }
  std::vector<uint64_t> ids;
  uint64_t after = 0;
  int pages = 0;
  for (;;) {
    RegionPage page = table_.ListPage(after, 10);
    ++pages;
    for (const RegionSnapshot& r : page.regions) ids.push_back(r.id);
    if (!page.more) break;
    ASSERT_EQ(page.regions.size(), 10u);
    after = page.regions.back().id;
  }
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(ids.size(), 25u);
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_LT(ids[i - 1], ids[i]);
  // Exactly a page: no "more".
  EXPECT_FALSE(table_.ListPage(0, 25).more);
  EXPECT_TRUE(table_.ListPage(ids.back(), 10).regions.empty());
  ASSERT_TRUE(table_.SnapshotByName("r7").has_value());
  EXPECT_EQ(table_.SnapshotByName("r7")->name, "r7");
  EXPECT_FALSE(table_.SnapshotByName("r99").has_value());
}

TEST_F(RegionTableTest, ListExportedShowsOnlyExportedInNameOrder) {
  for (const char* name : {"c", "a", "d", "b"}) {
    AllocateOptions o = Named(name, 64);
    if (std::string(name) != "d") o.export_access = RemoteAccess::kRead;
    ASSERT_TRUE(table_.Allocate(kAlice, o).ok());
  }
  RegionPage first = table_.ListExported("", 2);
  ASSERT_EQ(first.regions.size(), 2u);
  EXPECT_EQ(first.regions[0].name, "a");
  EXPECT_EQ(first.regions[1].name, "b");
  EXPECT_TRUE(first.more);
  RegionPage second = table_.ListExported("b", 2);
  ASSERT_EQ(second.regions.size(), 1u);
  EXPECT_EQ(second.regions[0].name, "c");  // not "d": local only
  EXPECT_FALSE(second.more);
}

}  // namespace
}  // namespace rdmad::core
