#include "daemon/core/region_table.h"

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/callers.h"

namespace rdmad::core {
namespace {

using core::testing::kAlice;

using ::testing::ElementsAre;
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

constexpr Caller kAliceOtherSession{2, 1000, 1000, 12};
// Another user, in group 1001.
constexpr Caller kOtherUser{3, 1001, 1001, 13};
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

// Memory charged outside regions (queue rings) counts against the uid's
// pinned-bytes quota, and a charge gives its bytes back once, whether it is
// released, moved from or destroyed.
TEST(RegionTableQuotaTest, MemoryChargesCountAndGiveBackOnce) {
  FakeRegistrar registrar;
  RegionLimits limits;
  limits.max_pinned_bytes_per_uid = 1 << 20;
  RegionTable table(&registrar, limits);

  absl::StatusOr<MemoryCharge> first =
      table.ChargeMemory(kAlice, 768 << 10, "a queue of 768 KiB");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(table.UsageOf(kAlice.uid).pinned_bytes, 768u << 10);

  absl::StatusOr<MemoryCharge> over =
      table.ChargeMemory(kAlice, 512 << 10, "a queue of 512 KiB");
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("a queue of 512 KiB"));
  EXPECT_THAT(over.status().message(),
              HasSubstr("quota_pinned_bytes_per_uid"));
  EXPECT_TRUE(table.ChargeMemory(kOtherUser, 512 << 10, "bob's queue").ok())
      << "quotas are per uid";

  MemoryCharge moved = std::move(*first);
  EXPECT_EQ(first->bytes(), 0u);
  EXPECT_EQ(table.UsageOf(kAlice.uid).pinned_bytes, 768u << 10);
  moved.Release();
  moved.Release();
  EXPECT_EQ(table.UsageOf(kAlice.uid).pinned_bytes, 0u);
  {
    absl::StatusOr<MemoryCharge> scoped =
        table.ChargeMemory(kAlice, 1 << 20, "a queue of 1 MiB");
    ASSERT_TRUE(scoped.ok()) << scoped.status();
  }
  EXPECT_EQ(table.UsageOf(kAlice.uid).pinned_bytes, 0u);
}

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
  EXPECT_EQ(table_.Allocate(kAlice, Named("bad//name", 10)).status().code(),
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
  auto again = table_.Allocate(kOtherUser, Named("dup", 10));
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
  EXPECT_EQ(table_.Free(kOtherUser, key).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(table_.FindForUse(kAlice, key).ok());

  ASSERT_TRUE(table_.Allocate(kAlice, Named("shared", 100)).ok());
  // Named regions: same uid from any session, or root.
  EXPECT_TRUE(table_.FindForUse(kAliceOtherSession, {0, "shared"}).ok());
  EXPECT_TRUE(table_.FindForUse(kRoot, {0, "shared"}).ok());
  EXPECT_EQ(table_.FindForUse(kOtherUser, {0, "shared"}).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(table_.Free(kOtherUser, {0, "shared"}).code(),
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
  EXPECT_EQ(table_.Export(kOtherUser, {0, "e"}, RemoteAccess::kRead).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(RegionTableTest, AnonymousBuffersCannotBeExported) {
  auto r = table_.Allocate(kAlice, Named("", 100, false));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(table_.Export(kAlice, {(*r)->id(), ""}, RemoteAccess::kRead)
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  // Nor exported at birth: refused, and nothing is made or registered.
  AllocateOptions exported = Named("", 100, false);
  exported.export_access = RemoteAccess::kReadWrite;
  const int registered = registrar_.registered();
  auto refused = table_.Allocate(kAlice, exported);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("only named regions can be exported"));
  EXPECT_EQ(registrar_.registered(), registered);
  EXPECT_EQ(table_.List().size(), 1u);
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
  ASSERT_TRUE(table_.Allocate(kOtherUser, Named("", 100, false)).ok());
  EXPECT_EQ(table_.FreeSession(kAlice.session_id), 2u);
  EXPECT_EQ(table_.Totals().count, 2u);
  EXPECT_TRUE(table_.FindForUse(kAlice, {0, "kept"}).ok());
  // The name of a freed session buffer can be reused.
  EXPECT_TRUE(table_.Allocate(kOtherUser, Named("named-buf", 100, false)).ok());
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

// A keeper that records what the table asks of it; memory is a plain memfd.
class FakeKeeper final : public RegionKeeper {
 public:
  class Handle final : public KeptRegion {
   public:
    Handle(FakeKeeper* keeper, std::string name)
        : keeper_(keeper), name_(std::move(name)) {}
    absl::Status SetExportAccess(
        RemoteAccess access, const std::vector<ExportGrant>& allow) override {
      absl::MutexLock lock(&keeper_->mu_);
      if (keeper_->fail_records_) return absl::UnavailableError("disk full");
      keeper_->log_.push_back(absl::StrCat("export ", name_, " ",
                                           static_cast<int>(access)));
      for (const ExportGrant& grant : allow) {
        keeper_->log_.push_back(absl::StrCat(
            "allow ", name_, " ", ExportAccessList::FormatGrant(grant)));
      }
      return absl::OkStatus();
    }
    absl::Status SetAcl(const RegionAcl& acl) override {
      absl::MutexLock lock(&keeper_->mu_);
      if (keeper_->fail_records_) return absl::UnavailableError("disk full");
      keeper_->log_.push_back(absl::StrCat("acl ", name_, " ", acl.uid, ":",
                                           acl.gid, " ", FormatMode(acl.mode)));
      return absl::OkStatus();
    }
    void Forget() override {
      absl::MutexLock lock(&keeper_->mu_);
      keeper_->log_.push_back("forget " + name_);
    }
    void Discard(const std::string& why) override {
      absl::MutexLock lock(&keeper_->mu_);
      keeper_->log_.push_back("discard " + name_ + ": " + why);
    }

   private:
    FakeKeeper* keeper_;
    std::string name_;
  };

  absl::StatusOr<KeptMemory> Create(const KeptRegionInfo& info) override {
    {
      absl::MutexLock lock(&mu_);
      log_.push_back(absl::StrCat("create ", info.name, " ", info.size, " ",
                                  info.acl.uid, ":", info.acl.gid, " ",
                                  FormatMode(info.acl.mode), " ",
                                  static_cast<int>(info.export_access)));
    }
    auto segment = ShmSegment::Create(info.name, info.size);
    if (!segment.ok()) return segment.status();
    return KeptMemory{*std::move(segment),
                      std::make_unique<Handle>(this, info.name)};
  }
  std::string Describe() const override { return "a fake keeper"; }

  std::unique_ptr<KeptRegion> NewHandle(const std::string& name) {
    return std::make_unique<Handle>(this, name);
  }
  std::vector<std::string> TakeLog() {
    absl::MutexLock lock(&mu_);
    return std::exchange(log_, {});
  }
  void FailRecords(bool fail) {
    absl::MutexLock lock(&mu_);
    fail_records_ = fail;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
  bool fail_records_ ABSL_GUARDED_BY(mu_) = false;
};

class KeptRegionTableTest : public RegionTableTest {
 protected:
  KeptRegionInfo Info(const std::string& name, uint64_t size,
                      RemoteAccess access) {
    KeptRegionInfo info;
    info.name = name;
    info.size = size;
    info.acl = {1001, 2000, 0640};
    info.export_access = access;
    return info;
  }
  absl::StatusOr<std::shared_ptr<Region>> Restore(const KeptRegionInfo& info) {
    auto segment = ShmSegment::Create(info.name, info.size);
    EXPECT_TRUE(segment.ok());
    return kept_table_.Restore(info, *std::move(segment),
                               keeper_.NewHandle(info.name));
  }

  FakeKeeper keeper_;
  RegionTable kept_table_{&registrar_, RegionLimits{64 << 20, 1ull << 30},
                          &keeper_};
};

TEST_F(KeptRegionTableTest, NamedRegionsGoThroughTheKeeperSessionBuffersDoNot) {
  AllocateOptions options = Named("kv", 4096);
  options.mode = 0640;
  options.export_access = RemoteAccess::kRead;
  auto kept = kept_table_.Allocate(kAlice, options);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_NE((*kept)->kept(), nullptr);
  auto buffer = kept_table_.Allocate(kAlice, Named("", 4096, false));
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ((*buffer)->kept(), nullptr);
  EXPECT_THAT(keeper_.TakeLog(), ElementsAre("create kv 4096 1000:1000 0640 1"));
  const RegionTotals totals = kept_table_.Totals();
  EXPECT_EQ(totals.count, 2u);
  EXPECT_EQ(totals.kept_count, 1u);
  EXPECT_EQ(totals.kept_bytes, 4096u);
}

TEST_F(KeptRegionTableTest, ExportIsRecordedFirstAndFreeForgets) {
  ASSERT_TRUE(kept_table_.Allocate(kAlice, Named("e", 4096)).ok());
  keeper_.TakeLog();
  ASSERT_TRUE(kept_table_.Export(kAlice, {0, "e"}, RemoteAccess::kWrite).ok());
  ASSERT_TRUE(kept_table_.Export(kAlice, {0, "e"}, RemoteAccess::kNone).ok());
  EXPECT_THAT(keeper_.TakeLog(), ElementsAre("export e 2", "export e 0"));
  // A record that cannot be written: the export does not change either.
  keeper_.FailRecords(true);
  auto failed = kept_table_.Export(kAlice, {0, "e"}, RemoteAccess::kRead);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(kept_table_.FindExported("e").ok());
  keeper_.FailRecords(false);
  ASSERT_TRUE(kept_table_.Free(kAlice, {0, "e"}).ok());
  EXPECT_THAT(keeper_.TakeLog(), ElementsAre("forget e"));
}

// chmod/chgrp of a kept region: the record first, so that the next daemon
// gives the region the permissions in force; nothing changes if it cannot
// be written.
TEST_F(KeptRegionTableTest, PermissionChangesAreRecordedFirst) {
  ASSERT_TRUE(kept_table_.Allocate(kAlice, Named("p", 4096)).ok());
  keeper_.TakeLog();
  auto changed = kept_table_.SetPermissions(kAlice, {0, "p"}, 0644, std::nullopt);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_THAT(keeper_.TakeLog(), ElementsAre("acl p 1000:1000 0644"));
  keeper_.FailRecords(true);
  auto failed = kept_table_.SetPermissions(kAlice, {0, "p"}, 0600, std::nullopt);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  keeper_.FailRecords(false);
  auto region = kept_table_.FindForUse(kAlice, {0, "p"});
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ((*region)->acl().mode, 0644u);
}

TEST_F(KeptRegionTableTest, FailedAllocationForgetsWhatTheKeeperMade) {
  registrar_.FailNext();
  EXPECT_FALSE(kept_table_.Allocate(kAlice, Named("f", 4096)).ok());
  EXPECT_THAT(keeper_.TakeLog(),
              ElementsAre(HasSubstr("create f"), "forget f"));
  EXPECT_EQ(kept_table_.Totals().count, 0u);
}

TEST_F(KeptRegionTableTest, RestoreAdoptsUnderTheOldNameWithNewKeys) {
  auto restored = Restore(Info("cache", 8192, RemoteAccess::kReadWrite));
  ASSERT_TRUE(restored.ok()) << restored.status();
  const RegionSnapshot snapshot = (*restored)->Snapshot();
  EXPECT_EQ(snapshot.name, "cache");
  EXPECT_EQ(snapshot.owner, RegionOwnerKind::kDaemon);
  EXPECT_EQ(snapshot.owner_uid, 1001u);
  EXPECT_EQ(snapshot.owner_gid, 2000u);
  EXPECT_EQ(snapshot.mode, 0640u);
  EXPECT_EQ(snapshot.exported.access, RemoteAccess::kReadWrite);
  EXPECT_NE(snapshot.exported.tcp_key, 0u);
  EXPECT_EQ(snapshot.exported.keys.size(), 1u);  // registered anew
  EXPECT_NE((*restored)->kept(), nullptr);
  EXPECT_TRUE(kept_table_.FindExported("cache").ok());
  // Its owner (Bob, uid 1001) may use and free it.
  EXPECT_TRUE(kept_table_.FindForUse(kOtherUser, {0, "cache"}).ok());
  EXPECT_EQ(kept_table_.UsageOf(1001).regions, 1u);
  EXPECT_TRUE(keeper_.TakeLog().empty());
  ASSERT_TRUE(kept_table_.Free(kOtherUser, {0, "cache"}).ok());
  EXPECT_THAT(keeper_.TakeLog(), ElementsAre("forget cache"));
}

TEST_F(KeptRegionTableTest, RestoreRefusalsDiscardNeverHalfUse) {
  ASSERT_TRUE(Restore(Info("dup", 4096, RemoteAccess::kNone)).ok());
  auto dup = Restore(Info("dup", 4096, RemoteAccess::kNone));
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kAlreadyExists);
  auto big = Restore(Info("big", 128 << 20, RemoteAccess::kNone));
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  registrar_.FailNext();
  auto unregistered = Restore(Info("unreg", 4096, RemoteAccess::kNone));
  EXPECT_FALSE(unregistered.ok());
  auto segment = ShmSegment::Create("mismatch", 4096);
  ASSERT_TRUE(segment.ok());
  auto mismatch = kept_table_.Restore(Info("mismatch", 8192, RemoteAccess::kNone),
                                      *std::move(segment),
                                      keeper_.NewHandle("mismatch"));
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(keeper_.TakeLog(),
              ElementsAre(HasSubstr("discard dup: a region named 'dup'"),
                          HasSubstr("discard big: adopting"),
                          HasSubstr("discard unreg: ibv_reg_mr"),
                          HasSubstr("discard mismatch: the record says 8192")));
  EXPECT_EQ(kept_table_.Totals().count, 1u);
  EXPECT_EQ(kept_table_.UsageOf(1001).regions, 1u);
}

}  // namespace
}  // namespace rdmad::core

namespace rdmad::core {
namespace {

// A chmod or chgrp that takes rights away ends the export's keys, as a
// re-export does (a descriptor is a bearer capability, and only new keys
// take it back); one that only adds rights leaves them. A region that is
// not exported has no keys to change.
TEST_F(RegionTableTest, TakingRightsAwayReKeysTheExport) {
  AllocateOptions options = Named("kv", 4096);
  options.mode = 0664;
  options.export_access = RemoteAccess::kReadWrite;
  auto region = table_.Allocate(kAlice, options);
  ASSERT_TRUE(region.ok()) << region.status();
  auto keys = [&] { return (*region)->exported(); };
  const ExportState first = keys();
  ASSERT_NE(first.tcp_key, 0u);
  const int registered = registrar_.registered();
  const int deregistered = registrar_.deregistered();

  ASSERT_TRUE(
      table_.SetPermissions(kAlice, {0, "kv"}, 0666, std::nullopt).ok());
  EXPECT_EQ(keys().tcp_key, first.tcp_key) << "rights added: same keys";
  EXPECT_EQ(registrar_.registered(), registered);

  ASSERT_TRUE(
      table_.SetPermissions(kAlice, {0, "kv"}, 0644, std::nullopt).ok());
  const ExportState second = keys();
  EXPECT_NE(second.tcp_key, first.tcp_key) << "write taken from some";
  ASSERT_EQ(second.keys.size(), 1u);
  EXPECT_NE(second.keys[0].rkey, first.keys[0].rkey);
  EXPECT_EQ(second.access, RemoteAccess::kReadWrite) << "the export stays";
  EXPECT_EQ(registrar_.registered(), registered + 1);
  EXPECT_EQ(registrar_.deregistered(), deregistered + 1)
      << "the old keys' registration is gone when chmod returns";

  // A new group takes the group's rights from the old one's members.
  Caller in_group = kAlice;
  in_group.groups = {4242};
  ASSERT_TRUE(
      table_.SetPermissions(in_group, {0, "kv"}, std::nullopt, 4242).ok());
  EXPECT_NE(keys().tcp_key, second.tcp_key);

  // Not exported: nothing to re-key.
  ASSERT_TRUE(table_.Allocate(kAlice, Named("plain", 4096)).ok());
  const int before_plain = registrar_.registered();
  ASSERT_TRUE(
      table_.SetPermissions(kAlice, {0, "plain"}, 0400, std::nullopt).ok());
  EXPECT_EQ(registrar_.registered(), before_plain);
}

// chmod/chgrp of named regions: the owner or root, real groups, and the
// change applies to the next use.
TEST_F(RegionTableTest, SetPermissionsIsForOwnersOfNamedRegions) {
  ASSERT_TRUE(table_.Allocate(kAlice, Named("kv", 4096)).ok());
  // Bob may not use it (0600), nor change that.
  EXPECT_EQ(table_.FindForUse(kOtherUser, {0, "kv"}, kLocalRead).status().code(),
            absl::StatusCode::kPermissionDenied);
  auto by_bob = table_.SetPermissions(kOtherUser, {0, "kv"}, 0666, std::nullopt);
  EXPECT_EQ(by_bob.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(by_bob.status().message(), HasSubstr("only that user or root"));
  // The owner grants read to others: Bob reads, but does not write.
  auto opened = table_.SetPermissions(kAlice, {0, "kv"}, 0604, std::nullopt);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->acl().mode, 0604u);
  EXPECT_TRUE(table_.FindForUse(kOtherUser, {0, "kv"}, kLocalRead).ok());
  EXPECT_FALSE(table_.FindForUse(kOtherUser, {0, "kv"}, kLocalWrite).ok());
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
