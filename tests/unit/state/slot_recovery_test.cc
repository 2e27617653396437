// RecoverSlots on its own, over a storage in memory: a whole slot is
// adopted through the storage's handle; memory without a record is removed
// with a note; each kind of damage is skipped, discarded once, and named as
// precisely as the record allows; a repair the storage made is a warning.
#include "daemon/state/slot_recovery.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/state/region_record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::state {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr char kSlot[] = "5f0c2a7e91d3b846";
constexpr char kOtherSlot[] = "00112233445566ff";
constexpr uint64_t kSize = 8192;

// The record of region "kv" in `slot`, as a keeper writes it.
std::string RecordText(const std::string& slot) {
  RegionRecord record;
  record.slot = slot;
  record.info.name = "kv";
  record.info.size = kSize;
  record.info.acl = {1000, 1000, 0640};
  return EncodeRegionRecord(record);
}

class NoopKeptRegion final : public core::KeptRegion {
 public:
  absl::Status SetExportAccess(core::RemoteAccess,
                               const std::vector<core::ExportGrant>&) override {
    return absl::OkStatus();
  }
  absl::Status SetAcl(const core::RegionAcl&) override {
    return absl::OkStatus();
  }
  void Forget() override {}
  void Discard(const std::string&) override {}
};

// Slots in memory; records what the recovery asked of it.
class FakeSlots final : public SlotStorage {
 public:
  // Record texts (or errors) by slot; slots whose memory maps.
  std::map<std::string, absl::StatusOr<std::string>> records;
  std::set<std::string> memories;
  // When set, MapMemory fails with it.
  absl::Status map_error = absl::OkStatus();
  std::string map_warning;

  std::vector<std::string> kept;       // slots Keep was asked for
  std::vector<std::string> discarded;  // "SLOT|REGION|WHY"
  std::vector<std::string> removed;    // slots whose memory was removed

  absl::StatusOr<std::string> ReadRecord(const std::string& slot) override {
    return records.at(slot);
  }
  absl::StatusOr<core::ShmSegment> MapMemory(const std::string& slot,
                                             uint64_t size,
                                             std::string* warning) override {
    EXPECT_TRUE(memories.contains(slot));
    if (!map_error.ok()) return map_error;
    *warning = map_warning;
    return core::ShmSegment::Create("slot-recovery-test", size);
  }
  std::string MissingMemory(const std::string& slot) const override {
    return absl::StrCat("no memory for ", slot);
  }
  std::unique_ptr<core::KeptRegion> Keep(
      const RegionRecord& record, const core::ShmSegment& segment) override {
    EXPECT_GE(segment.size(), record.info.size);
    kept.push_back(record.slot);
    return std::make_unique<NoopKeptRegion>();
  }
  void Discard(const std::string& slot, const std::string& region,
               const std::string& why) override {
    discarded.push_back(absl::StrCat(slot, "|", region, "|", why));
  }
  std::string RemoveMemory(const std::string& slot) override {
    removed.push_back(slot);
    return absl::StrCat("memory of ", slot);
  }

  std::set<std::string> RecordSlots() const {
    std::set<std::string> slots;
    for (const auto& [slot, text] : records) slots.insert(slot);
    return slots;
  }
  Recovery Run() {
    Recovery found;
    RecoverSlots(RecordSlots(), memories, *this, found);
    return found;
  }
};

TEST(SlotRecoveryTest, AdoptsAWholeSlotThroughTheStoragesHandle) {
  FakeSlots storage;
  storage.records.emplace(kSlot, RecordText(kSlot));
  storage.memories = {kSlot};
  Recovery found = storage.Run();
  ASSERT_THAT(found.regions, SizeIs(1));
  EXPECT_EQ(found.regions[0].info.name, "kv");
  EXPECT_EQ(found.regions[0].info.size, kSize);
  EXPECT_GE(found.regions[0].segment.size(), kSize);
  EXPECT_NE(found.regions[0].kept, nullptr);
  EXPECT_THAT(storage.kept, ElementsAre(kSlot));
  EXPECT_THAT(found.skipped, IsEmpty());
  EXPECT_THAT(found.notes, IsEmpty());
  EXPECT_THAT(found.warnings, IsEmpty());
  EXPECT_THAT(storage.discarded, IsEmpty());
  EXPECT_THAT(storage.removed, IsEmpty());
}

TEST(SlotRecoveryTest, RemovesMemoryWithoutARecordWithANote) {
  FakeSlots storage;
  storage.records.emplace(kSlot, RecordText(kSlot));
  storage.memories = {kSlot, kOtherSlot};
  Recovery found = storage.Run();
  EXPECT_THAT(storage.removed, ElementsAre(kOtherSlot));
  ASSERT_THAT(found.notes, SizeIs(1));
  EXPECT_EQ(found.notes[0],
            absl::StrCat("removed memory of ", kOtherSlot,
                         ": memory without a record (a crash while a region "
                         "was created or freed)"));
  // The slot with both is adopted all the same.
  EXPECT_THAT(storage.kept, ElementsAre(kSlot));
}

struct Damage {
  std::string name;
  absl::StatusOr<std::string> record;
  bool memory;  // whether the slot has memory
  absl::Status map_error;
  // What the skip says: its region, a fragment of why, its bytes.
  std::string region;
  std::string why;
  uint64_t bytes;
};

TEST(SlotRecoveryTest, SkipsEachKindOfDamageAndDiscardsItOnce) {
  const std::string by_slot = absl::StrCat("slot ", kSlot);
  const std::string by_name = absl::StrCat("region 'kv' (slot ", kSlot, ")");
  const Damage rows[] = {
      {"unreadable record", absl::DataLossError("cannot read the record"), true,
       absl::OkStatus(), by_slot, "cannot read the record", 0},
      {"damaged record", std::string("rdmad-region-record 1\nslot x\n"), true,
       absl::OkStatus(), by_slot, "", 0},
      {"record of another slot", RecordText(kOtherSlot), true, absl::OkStatus(),
       by_name,
       absl::StrCat("it names slot ", kOtherSlot, " but is the record of slot ",
                    kSlot),
       kSize},
      {"missing memory", RecordText(kSlot), false, absl::OkStatus(), by_name,
       absl::StrCat("no memory for ", kSlot), kSize},
      {"memory that does not map", RecordText(kSlot), true,
       absl::DataLossError("sealed against nothing"), by_name,
       "its memory: sealed against nothing", kSize},
  };
  for (const Damage& row : rows) {
    SCOPED_TRACE(row.name);
    FakeSlots storage;
    storage.records.emplace(kSlot, row.record);
    if (row.memory) storage.memories = {kSlot};
    storage.map_error = row.map_error;
    Recovery found = storage.Run();
    EXPECT_THAT(found.regions, IsEmpty());
    EXPECT_THAT(storage.kept, IsEmpty());
    ASSERT_THAT(found.skipped, SizeIs(1));
    const SkippedRegion& skip = found.skipped[0];
    EXPECT_EQ(skip.region, row.region);
    EXPECT_FALSE(skip.why.empty());
    EXPECT_THAT(skip.why, HasSubstr(row.why));
    EXPECT_EQ(skip.bytes, row.bytes);
    EXPECT_THAT(storage.discarded, ElementsAre(absl::StrCat(
                                       kSlot, "|", row.region, "|", skip.why)));
    EXPECT_THAT(storage.removed, IsEmpty());
  }
}

TEST(SlotRecoveryTest, PassesARepairTheStorageMadeOnAsAWarning) {
  FakeSlots storage;
  storage.records.emplace(kSlot, RecordText(kSlot));
  storage.memories = {kSlot};
  storage.map_warning = "it had grown to 1 MiB; cut back";
  Recovery found = storage.Run();
  ASSERT_THAT(found.regions, SizeIs(1));
  EXPECT_THAT(found.warnings,
              ElementsAre(absl::StrCat("kept region 'kv' (slot ", kSlot,
                                       "): it had grown to 1 MiB; cut back")));
}

}  // namespace
}  // namespace rdmad::state
