// FdStoreKeeper against an in-memory stand-in for systemd's fd store: what
// it stores comes back (as LISTEN_FDS would pass it) with the same bytes and
// record; export changes replace the record without a moment where none is
// stored; crash leftovers and damage are removed, never adopted.
#include "daemon/state/fd_store_keeper.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/state/region_record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::state {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// Holds duplicates of what is stored, by name, as systemd does.
class FakeStore {
 public:
  class Client final : public FdStore {
   public:
    explicit Client(FakeStore* store) : store_(store) {}
    absl::Status Store(const std::string& name, int fd) override {
      absl::MutexLock lock(&store_->mu_);
      if (store_->fail_stores_ > 0 &&
          absl::StartsWith(name, store_->fail_prefix_)) {
        --store_->fail_stores_;
        return absl::UnavailableError("notify socket gone");
      }
      store_->fds_.emplace(name, UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)));
      return absl::OkStatus();
    }
    absl::Status Remove(const std::string& name) override {
      absl::MutexLock lock(&store_->mu_);
      store_->fds_.erase(name);
      return absl::OkStatus();
    }

   private:
    FakeStore* store_;
  };

  std::unique_ptr<FdStore> NewClient() {
    return std::make_unique<Client>(this);
  }

  // What the next start receives: a duplicate of every stored descriptor.
  std::vector<NamedFd> Pass() {
    absl::MutexLock lock(&mu_);
    std::vector<NamedFd> passed;
    for (const auto& [name, fd] : fds_) {
      passed.push_back({name, UniqueFd(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0))});
    }
    return passed;
  }
  std::vector<std::string> Names() {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> names;
    for (const auto& [name, fd] : fds_) names.push_back(name);
    return names;
  }
  void Put(const std::string& name, UniqueFd fd) {
    absl::MutexLock lock(&mu_);
    fds_.emplace(name, std::move(fd));
  }
  // The next `n` stores of names starting with `prefix` fail.
  void FailStores(int n, const std::string& prefix = "") {
    absl::MutexLock lock(&mu_);
    fail_stores_ = n;
    fail_prefix_ = prefix;
  }

 private:
  absl::Mutex mu_;
  std::multimap<std::string, UniqueFd> fds_ ABSL_GUARDED_BY(mu_);
  int fail_stores_ ABSL_GUARDED_BY(mu_) = 0;
  std::string fail_prefix_ ABSL_GUARDED_BY(mu_);
};

core::KeptRegionInfo StoredInfo(const std::string& name, uint64_t size) {
  core::KeptRegionInfo info;
  info.name = name;
  info.size = size;
  info.acl = {1000, 1000, 0600};
  info.export_access = core::RemoteAccess::kNone;
  return info;
}

UniqueFd TextMemfd(const std::string& text) {
  UniqueFd fd(::memfd_create("test", MFD_CLOEXEC));
  EXPECT_EQ(::write(fd.get(), text.data(), text.size()),
            static_cast<ssize_t>(text.size()));
  return fd;
}

class FdStoreKeeperTest : public ::testing::Test {
 protected:
  std::unique_ptr<FdStoreKeeper> Start() {
    return std::make_unique<FdStoreKeeper>(store_.NewClient(), store_.Pass());
  }
  // The slot of the only region stored.
  std::string OnlySlot() {
    for (const std::string& name : store_.Names()) {
      if (absl::StartsWith(name, "rdmad-mem-")) return name.substr(10);
    }
    return "";
  }
  FakeStore store_;
};

TEST_F(FdStoreKeeperTest, RegionsComeBackWithTheirBytesAndRecords) {
  {
    auto keeper = Start();
    core::KeptRegionInfo info = StoredInfo("kv", 70000);
    info.export_access = core::RemoteAccess::kWrite;
    auto memory = keeper->Create(info);
    ASSERT_TRUE(memory.ok()) << memory.status();
    std::memcpy(memory->segment.data(), "fd store bytes", 14);
  }
  const std::string slot = OnlySlot();
  EXPECT_THAT(store_.Names(),
              ElementsAre(MemoryFdName(slot), RecordFdName(slot, 1)));
  auto keeper = Start();
  Recovery found = keeper->Recover();
  EXPECT_THAT(found.skipped, IsEmpty());
  EXPECT_THAT(found.notes, IsEmpty());
  ASSERT_THAT(found.regions, SizeIs(1));
  EXPECT_EQ(found.regions[0].info.name, "kv");
  EXPECT_EQ(found.regions[0].info.size, 70000u);
  EXPECT_EQ(found.regions[0].info.export_access, core::RemoteAccess::kWrite);
  EXPECT_EQ(
      std::string(static_cast<char*>(found.regions[0].segment.data()), 14),
      "fd store bytes");
  EXPECT_FALSE(found.regions[0].segment.can_shrink());
}

TEST_F(FdStoreKeeperTest, ExportChangeStoresTheNextRecordThenRemovesTheOld) {
  auto keeper = Start();
  auto memory = keeper->Create(StoredInfo("x", 4096));
  ASSERT_TRUE(memory.ok());
  const std::string slot = OnlySlot();
  ASSERT_TRUE(memory->kept->SetExportAccess(core::RemoteAccess::kRead, {}).ok());
  EXPECT_THAT(store_.Names(),
              ElementsAre(MemoryFdName(slot), RecordFdName(slot, 2)));
  ASSERT_TRUE(memory->kept->SetExportAccess(core::RemoteAccess::kRead, {}).ok());
  EXPECT_THAT(store_.Names(),
              ElementsAre(MemoryFdName(slot), RecordFdName(slot, 2)));
  // A store that refuses: the export change fails, the old record stands.
  store_.FailStores(1);
  EXPECT_FALSE(memory->kept->SetExportAccess(core::RemoteAccess::kNone, {}).ok());
  EXPECT_THAT(store_.Names(),
              ElementsAre(MemoryFdName(slot), RecordFdName(slot, 2)));
  memory->kept->Forget();
  EXPECT_THAT(store_.Names(), IsEmpty());
}

TEST_F(FdStoreKeeperTest, PermissionChangeStoresTheNextRecord) {
  {
    auto keeper = Start();
    auto memory = keeper->Create(StoredInfo("p", 4096));
    ASSERT_TRUE(memory.ok());
    ASSERT_TRUE(memory->kept->SetAcl({1000, 1002, 0644}).ok());
  }
  const std::string slot = OnlySlot();
  EXPECT_THAT(store_.Names(),
              ElementsAre(MemoryFdName(slot), RecordFdName(slot, 2)));
  auto keeper = Start();
  Recovery found = keeper->Recover();
  ASSERT_THAT(found.regions, SizeIs(1));
  EXPECT_EQ(found.regions[0].info.acl.gid, 1002u);
  EXPECT_EQ(found.regions[0].info.acl.mode, 0644u);
}

TEST_F(FdStoreKeeperTest, NewestRecordWinsAfterACrashMidChange) {
  {
    auto keeper = Start();
    auto memory = keeper->Create(StoredInfo("x", 4096));
    ASSERT_TRUE(memory.ok());
  }
  const std::string slot = OnlySlot();
  // A crash between storing generation 2 and removing generation 1.
  RegionRecord newer;
  newer.slot = slot;
  newer.info = StoredInfo("x", 4096);
  newer.info.export_access = core::RemoteAccess::kReadWrite;
  store_.Put(RecordFdName(slot, 2), TextMemfd(EncodeRegionRecord(newer)));
  auto keeper = Start();
  Recovery found = keeper->Recover();
  ASSERT_THAT(found.regions, SizeIs(1));
  EXPECT_EQ(found.regions[0].info.export_access,
            core::RemoteAccess::kReadWrite);
  EXPECT_THAT(store_.Names(),
              ElementsAre(MemoryFdName(slot), RecordFdName(slot, 2)));
}

TEST_F(FdStoreKeeperTest, DamageAndLeftoversAreRemovedNeverAdopted) {
  {
    auto keeper = Start();
    ASSERT_TRUE(keeper->Create(StoredInfo("good", 4096)).ok());
  }
  const std::string good = OnlySlot();
  // A damaged record (with its memory), memory without a record, a record
  // without memory, unsealed memory, a malformed name of ours, and a
  // descriptor that is not ours.
  auto made = core::ShmSegment::Create("d", 4096);
  ASSERT_TRUE(made.ok());
  store_.Put(MemoryFdName("1111111111111111"),
             UniqueFd(::fcntl(made->fd(), F_DUPFD_CLOEXEC, 0)));
  store_.Put(RecordFdName("1111111111111111", 1), TextMemfd("garbage\n"));
  store_.Put(MemoryFdName("2222222222222222"),
             UniqueFd(::fcntl(made->fd(), F_DUPFD_CLOEXEC, 0)));
  RegionRecord lonely;
  lonely.slot = "3333333333333333";
  lonely.info = StoredInfo("lonely", 4096);
  store_.Put(RecordFdName(lonely.slot, 1),
             TextMemfd(EncodeRegionRecord(lonely)));
  RegionRecord unsealed;
  unsealed.slot = "4444444444444444";
  unsealed.info = StoredInfo("unsealed", 4096);
  UniqueFd plain(::memfd_create("plain", MFD_CLOEXEC));
  ASSERT_EQ(::ftruncate(plain.get(), 4096), 0);
  store_.Put(MemoryFdName(unsealed.slot), std::move(plain));
  store_.Put(RecordFdName(unsealed.slot, 1),
             TextMemfd(EncodeRegionRecord(unsealed)));
  store_.Put("rdmad-mem-nothex", TextMemfd(""));
  store_.Put("socket-activation", TextMemfd(""));

  auto keeper = Start();
  Recovery found = keeper->Recover();
  ASSERT_THAT(found.regions, SizeIs(1));
  EXPECT_EQ(found.regions[0].info.name, "good");
  ASSERT_THAT(found.skipped, SizeIs(3));
  std::string reasons;
  for (const SkippedRegion& s : found.skipped) {
    absl::StrAppend(&reasons, s.region, ": ", s.why, "\n");
  }
  EXPECT_THAT(reasons, HasSubstr("slot 1111111111111111: damaged record"));
  EXPECT_THAT(reasons, HasSubstr("region 'lonely' (slot 3333333333333333): "
                                 "its memory is missing"));
  EXPECT_THAT(reasons, HasSubstr("region 'unsealed' (slot 4444444444444444): "
                                 "its memory: the kept descriptor is not a "
                                 "memfd sealed"));
  std::string notes;
  for (const std::string& n : found.notes) absl::StrAppend(&notes, n, "\n");
  EXPECT_THAT(notes, HasSubstr("rdmad-mem-2222222222222222 from the fd store: "
                               "memory without a record"));
  EXPECT_THAT(notes, HasSubstr("'rdmad-mem-nothex'"));
  EXPECT_THAT(notes, HasSubstr("'socket-activation' passed at start: not "
                               "rdmad's"));
  // Only the good region and the foreign descriptor remain stored.
  EXPECT_THAT(store_.Names(),
              ElementsAre(MemoryFdName(good), RecordFdName(good, 1),
                          "socket-activation"));
}

TEST_F(FdStoreKeeperTest, StoreFailureLeavesNothingBehind) {
  auto keeper = Start();
  store_.FailStores(1);
  auto memory = keeper->Create(StoredInfo("x", 4096));
  EXPECT_EQ(memory.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(memory.status().message(), HasSubstr("fd store"));
  EXPECT_THAT(store_.Names(), IsEmpty());
  // The record refused after the memory went in: the memory is taken back.
  store_.FailStores(1, "rdmad-rec-");
  memory = keeper->Create(StoredInfo("y", 4096));
  EXPECT_EQ(memory.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(memory.status().message(), HasSubstr("record"));
  EXPECT_THAT(store_.Names(), IsEmpty());
}

TEST_F(FdStoreKeeperTest, DiscardAllRemovesOnlyOurs) {
  {
    auto keeper = Start();
    ASSERT_TRUE(keeper->Create(StoredInfo("a", 4096)).ok());
    ASSERT_TRUE(keeper->Create(StoredInfo("b", 4096)).ok());
  }
  store_.Put("socket-activation", TextMemfd(""));
  auto keeper = Start();
  EXPECT_EQ(keeper->DiscardAll(), 2u);
  EXPECT_THAT(store_.Names(), ElementsAre("socket-activation"));
}

}  // namespace
}  // namespace rdmad::state
