// StateDirKeeper: regions created in a state directory come back, bytes and
// record, in the next keeper; what a crash or damage leaves behind is
// cleaned up or put aside with a reason, never adopted; the directory must
// be the daemon's own and is used by one daemon at a time.
#include "daemon/state/state_dir_keeper.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/state/region_record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/state_test_util.h"

namespace rdmad::state {
namespace {

using ::rdmad::testing::ListNames;
using ::rdmad::testing::ReadFile;
using ::rdmad::testing::ScratchDir;
using ::rdmad::testing::WriteFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

core::KeptRegionInfo Info(const std::string& name, uint64_t size) {
  core::KeptRegionInfo info;
  info.name = name;
  info.size = size;
  info.acl = {1000, 1001, 0640};
  info.export_access = core::RemoteAccess::kRead;
  return info;
}

class StateDirKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(scratch_.path().empty()); }

  std::unique_ptr<StateDirKeeper> Open() {
    auto keeper = StateDirKeeper::Open(dir_);
    EXPECT_TRUE(keeper.ok()) << keeper.status();
    return keeper.ok() ? *std::move(keeper) : nullptr;
  }

  // Creates a region holding `text` at offset 0 and returns its slot; the
  // keeper and the mapping are gone afterwards, as after a daemon exit.
  std::string Kept(const std::string& name, uint64_t size,
                   const std::string& text) {
    auto keeper = Open();
    if (keeper == nullptr) return "";
    auto memory = keeper->Create(Info(name, size));
    EXPECT_TRUE(memory.ok()) << memory.status();
    if (!memory.ok()) return "";
    std::memcpy(memory->segment.data(), text.data(), text.size());
    for (const std::string& file : ListNames(dir_)) {
      if (absl::EndsWith(file, ".rec")) {
        auto record =
            ParseRegionRecord(ReadFile(absl::StrCat(dir_, "/", file)));
        if (record.ok() && record->info.name == name) return record->slot;
      }
    }
    ADD_FAILURE() << "no record for " << name;
    return "";
  }

  std::string Path(const std::string& name) const {
    return absl::StrCat(dir_, "/", name);
  }

  ScratchDir scratch_;
  const std::string dir_ = scratch_ / "state";
};

TEST_F(StateDirKeeperTest, OpenCreatesAPrivateDirectory) {
  auto keeper = Open();
  ASSERT_NE(keeper, nullptr);
  struct stat st;
  ASSERT_EQ(::stat(dir_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(keeper->Describe(), "state directory " + dir_);
  EXPECT_FALSE(keeper->filesystem().empty());
}

TEST_F(StateDirKeeperTest, OneDaemonAtATime) {
  auto first = Open();
  ASSERT_NE(first, nullptr);
  auto second = StateDirKeeper::Open(dir_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(second.status().message(), HasSubstr("in use by another"));
  first.reset();
  EXPECT_TRUE(StateDirKeeper::Open(dir_).ok());
}

TEST_F(StateDirKeeperTest, RefusesADirectoryOthersCanWrite) {
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0770), 0);
  auto keeper = StateDirKeeper::Open(dir_);
  ASSERT_FALSE(keeper.ok());
  EXPECT_EQ(keeper.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(keeper.status().message(), HasSubstr("chmod 700"));
  EXPECT_EQ(StateDirKeeper::Open("relative/dir").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StateDirKeeper::Open(scratch_ / "no/such/parent").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StateDirKeeperTest, RegionsComeBackWithTheirBytesAndRecords) {
  const std::string slot = Kept("kv", 100000, "kept bytes");
  ASSERT_FALSE(slot.empty());
  EXPECT_THAT(ListNames(dir_), ElementsAre(slot + ".mem", slot + ".rec"));
  auto keeper = Open();
  Recovery found = keeper->Recover();
  EXPECT_THAT(found.skipped, IsEmpty());
  ASSERT_THAT(found.regions, SizeIs(1));
  const RecoveredRegion& region = found.regions[0];
  EXPECT_EQ(region.info.name, "kv");
  EXPECT_EQ(region.info.size, 100000u);
  EXPECT_EQ(region.info.acl.uid, 1000u);
  EXPECT_EQ(region.info.acl.gid, 1001u);
  EXPECT_EQ(region.info.acl.mode, 0640u);
  EXPECT_EQ(region.info.export_access, core::RemoteAccess::kRead);
  EXPECT_EQ(std::string(static_cast<char*>(region.segment.data()), 10),
            "kept bytes");
  EXPECT_EQ(region.segment.size(), 100000u);
}

TEST_F(StateDirKeeperTest, ExportChangesAreRecorded) {
  {
    auto keeper = Open();
    auto memory = keeper->Create(Info("x", 4096));
    ASSERT_TRUE(memory.ok());
    ASSERT_TRUE(
        memory->kept->SetExportAccess(core::RemoteAccess::kReadWrite, {}).ok());
  }
  auto keeper = Open();
  Recovery found = keeper->Recover();
  ASSERT_THAT(found.regions, SizeIs(1));
  EXPECT_EQ(found.regions[0].info.export_access,
            core::RemoteAccess::kReadWrite);
  ASSERT_TRUE(
      found.regions[0].kept->SetExportAccess(core::RemoteAccess::kNone, {}).ok());
  // Temporary files of the atomic write do not stay.
  for (const std::string& name : ListNames(dir_)) {
    EXPECT_FALSE(absl::EndsWith(name, ".tmp")) << name;
  }
}

TEST_F(StateDirKeeperTest, PermissionChangesAreRecorded) {
  {
    auto keeper = Open();
    auto memory = keeper->Create(Info("p", 4096));
    ASSERT_TRUE(memory.ok());
    ASSERT_TRUE(memory->kept->SetAcl({1000, 1002, 0644}).ok());
  }
  auto keeper = Open();
  Recovery found = keeper->Recover();
  ASSERT_THAT(found.regions, SizeIs(1));
  EXPECT_EQ(found.regions[0].info.acl.uid, 1000u);
  EXPECT_EQ(found.regions[0].info.acl.gid, 1002u);
  EXPECT_EQ(found.regions[0].info.acl.mode, 0644u);
}

TEST_F(StateDirKeeperTest, ForgetRemovesRecordAndMemory) {
  auto keeper = Open();
  auto memory = keeper->Create(Info("gone", 4096));
  ASSERT_TRUE(memory.ok());
  memory->kept->Forget();
  EXPECT_THAT(ListNames(dir_), IsEmpty());
  memory->kept->Forget();  // idempotent
  EXPECT_TRUE(memory->kept->SetExportAccess(core::RemoteAccess::kRead, {}).ok());
  EXPECT_THAT(ListNames(dir_), IsEmpty()) << "a forgotten region came back";
}

TEST_F(StateDirKeeperTest, DamagedRecordIsPutAsideWithWhy) {
  const std::string slot = Kept("broken", 4096, "data");
  std::string record = ReadFile(Path(slot + ".rec"));
  record[record.find("size 4096") + 5] = '8';
  WriteFile(Path(slot + ".rec"), record);
  const std::string good = Kept("good", 4096, "fine");

  auto keeper = Open();
  Recovery found = keeper->Recover();
  ASSERT_THAT(found.regions, SizeIs(1));
  EXPECT_EQ(found.regions[0].info.name, "good");
  ASSERT_THAT(found.skipped, SizeIs(1));
  EXPECT_THAT(found.skipped[0].region, HasSubstr(slot));
  EXPECT_THAT(found.skipped[0].why, HasSubstr("checksum"));
  EXPECT_THAT(ListNames(dir_),
              UnorderedElementsAre("damaged", good + ".mem", good + ".rec"));
  EXPECT_THAT(ListNames(Path("damaged")),
              ElementsAre(slot + ".mem", slot + ".rec", slot + ".why"));
  EXPECT_THAT(ReadFile(Path("damaged/" + slot + ".why")),
              HasSubstr("checksum"));
  EXPECT_EQ(keeper->DiscardedTo(), "moved to " + dir_ + "/damaged/");
}

TEST_F(StateDirKeeperTest, TruncatedMemoryIsSkippedNeverHalfUsed) {
  const std::string slot = Kept("cut", 1 << 20, "data");
  ASSERT_EQ(::truncate(Path(slot + ".mem").c_str(), 4096), 0);
  auto keeper = Open();
  Recovery found = keeper->Recover();
  EXPECT_THAT(found.regions, IsEmpty());
  ASSERT_THAT(found.skipped, SizeIs(1));
  EXPECT_THAT(found.skipped[0].region, HasSubstr("region 'cut'"));
  EXPECT_EQ(found.skipped[0].bytes, 1u << 20);
  EXPECT_THAT(found.skipped[0].why, HasSubstr("truncated"));
  EXPECT_THAT(ListNames(Path("damaged")), SizeIs(3));
  // The next start reports what is waiting in damaged/.
  keeper.reset();
  keeper = Open();
  found = keeper->Recover();
  ASSERT_THAT(found.notes, SizeIs(1));
  EXPECT_THAT(found.notes[0], HasSubstr("damaged/ holds 3 file(s)"));
}

TEST_F(StateDirKeeperTest, MissingMemoryAndMismatchedSlotAreSkipped) {
  const std::string lost = Kept("lost", 4096, "");
  ASSERT_EQ(::unlink(Path(lost + ".mem").c_str()), 0);
  const std::string a = Kept("a", 4096, "");
  const std::string b = Kept("b", 4096, "");
  // b's record copied over a's: a record must describe its own slot.
  WriteFile(Path(a + ".rec"), ReadFile(Path(b + ".rec")));
  auto keeper = Open();
  Recovery found = keeper->Recover();
  ASSERT_THAT(found.regions, SizeIs(1));
  EXPECT_EQ(found.regions[0].info.name, "b");
  ASSERT_THAT(found.skipped, SizeIs(2));
  std::string reasons;
  for (const SkippedRegion& s : found.skipped)
    absl::StrAppend(&reasons, s.why, ";");
  EXPECT_THAT(reasons, HasSubstr("is missing"));
  EXPECT_THAT(reasons, HasSubstr("names slot " + b));
}

TEST_F(StateDirKeeperTest, CrashLeftoversAreCleanedUp) {
  const std::string slot = Kept("kept", 4096, "");
  // Memory without a record (a crash during create or free), a record
  // write cut short, and someone else's file.
  WriteFile(Path("0123456789abcdef.mem"), std::string(4096, 'x'));
  WriteFile(Path(slot + ".rec.tmp"), "half a rec");
  WriteFile(Path("README"), "not ours");
  auto keeper = Open();
  Recovery found = keeper->Recover();
  EXPECT_THAT(found.regions, SizeIs(1));
  EXPECT_THAT(found.skipped, IsEmpty());
  EXPECT_THAT(ListNames(dir_),
              UnorderedElementsAre("README", slot + ".mem", slot + ".rec"));
  std::string notes;
  for (const std::string& n : found.notes) absl::StrAppend(&notes, n, ";");
  EXPECT_THAT(notes, HasSubstr("memory without a record"));
  EXPECT_THAT(notes, HasSubstr("README left alone"));
}

TEST_F(StateDirKeeperTest, DiscardAllEmptiesButLeavesOthersFiles) {
  Kept("one", 4096, "");
  Kept("two", 4096, "");
  WriteFile(Path("README"), "not ours");
  auto keeper = Open();
  EXPECT_EQ(keeper->DiscardAll(), 2u);
  EXPECT_THAT(ListNames(dir_), ElementsAre("README"));
}

TEST_F(StateDirKeeperTest, DiscardedHandleIsPutAside) {
  auto keeper = Open();
  auto memory = keeper->Create(Info("dup", 4096));
  ASSERT_TRUE(memory.ok());
  memory->kept->Discard("a region named 'dup' exists already");
  EXPECT_THAT(ListNames(dir_), ElementsAre("damaged"));
  const std::vector<std::string> aside = ListNames(Path("damaged"));
  ASSERT_THAT(aside, SizeIs(3));
  EXPECT_THAT(ReadFile(Path("damaged/" + aside[2])),
              HasSubstr("region 'dup': a region named 'dup' exists already"));
}

}  // namespace
}  // namespace rdmad::state
