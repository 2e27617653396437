#include "daemon/state/slot_recovery.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace rdmad::state {

void RecoverSlots(const std::set<std::string>& records,
                  const std::set<std::string>& memories, SlotStorage& storage,
                  Recovery& found) {
  for (const std::string& slot : memories) {
    if (records.contains(slot)) continue;
    // Nobody was told about this region, or it was freed.
    found.notes.push_back(absl::StrCat(
        "removed ", storage.RemoveMemory(slot),
        ": memory without a record (a crash while a region was created or "
        "freed)"));
  }
  for (const std::string& slot : records) {
    SkippedRegion skip;
    skip.region = absl::StrCat("slot ", slot);
    auto skipped = [&](std::string why) {
      skip.why = std::move(why);
      storage.Discard(slot, skip.region, skip.why);
      found.skipped.push_back(skip);
    };
    auto text = storage.ReadRecord(slot);
    if (!text.ok()) {
      skipped(std::string(text.status().message()));
      continue;
    }
    auto record = ParseRegionRecord(*text);
    if (!record.ok()) {
      skipped(std::string(record.status().message()));
      continue;
    }
    skip.region =
        absl::StrCat("region '", record->info.name, "' (slot ", slot, ")");
    skip.bytes = record->info.size;
    if (record->slot != slot) {
      skipped(absl::StrCat("damaged record: it names slot ", record->slot,
                           " but is the record of slot ", slot));
      continue;
    }
    if (!memories.contains(slot)) {
      skipped(storage.MissingMemory(slot));
      continue;
    }
    std::string warning;
    auto segment = storage.MapMemory(slot, record->info.size, &warning);
    if (!segment.ok()) {
      skipped(absl::StrCat("its memory: ", segment.status().message()));
      continue;
    }
    if (!warning.empty()) {
      found.warnings.push_back(
          absl::StrCat("kept ", skip.region, ": ", warning));
    }
    std::unique_ptr<core::KeptRegion> kept = storage.Keep(*record, *segment);
    found.regions.push_back(
        RecoveredRegion{record->info, *std::move(segment), std::move(kept)});
  }
}

}  // namespace rdmad::state
