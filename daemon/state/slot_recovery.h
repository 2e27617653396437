// RecoverSlots: the recovery algorithm both keepers run at start, written
// once. A keeper lists what its storage holds (the slots that have a
// record, the slots that have memory) and lends the storage's operations
// (SlotStorage); RecoverSlots decides what is adopted, skipped or removed:
//
//   memory, no record        a crash while a region was created or freed
//                            (both are ordered so that this is all a crash
//                            leaves): the memory is removed, with a note;
//   record unreadable,       skipped: the storage discards the slot (puts
//   damaged, of another      it aside or removes it) and the reason goes to
//   slot, or its memory      Recovery::skipped, naming the region once the
//   missing or unmappable    record says which it is;
//   the rest                 adopted: mapped, with the storage's handle.
//
// A record is never half-used: the region comes back exactly as recorded
// or not at all.
//
// Example (StateDirKeeper::Recover):
//   DirSlots storage(dir);
//   Recovery found;
//   RecoverSlots(records, memories, storage, found);
//
// Not thread-safe: runs once, at start, on the keeper's thread.
#ifndef RDMAD_DAEMON_STATE_SLOT_RECOVERY_H_
#define RDMAD_DAEMON_STATE_SLOT_RECOVERY_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/core/kept_region.h"
#include "daemon/core/shm_segment.h"
#include "daemon/state/recovery.h"
#include "daemon/state/region_record.h"

namespace rdmad::state {

// One keeper's storage of slots (a state directory, the fd store), as the
// recovery sees it. Each call is about one slot that the keeper listed.
class SlotStorage {
 public:
  virtual ~SlotStorage() = default;

  // The text of the slot's record; an error says why it cannot be read.
  virtual absl::StatusOr<std::string> ReadRecord(const std::string& slot) = 0;

  // Maps the memory of a slot that has memory, for a region of `size`
  // bytes. `*warning`: what was wrong and put right (a file that had grown,
  // cut back), else left empty.
  virtual absl::StatusOr<core::ShmSegment> MapMemory(const std::string& slot,
                                                     uint64_t size,
                                                     std::string* warning) = 0;

  // Why a slot with a record is skipped when it has no memory: "its memory
  // file SLOT.mem is missing".
  virtual std::string MissingMemory(const std::string& slot) const = 0;

  // The handle that keeps the adopted region's state from now on.
  virtual std::unique_ptr<core::KeptRegion> Keep(
      const RegionRecord& record, const core::ShmSegment& segment) = 0;

  // Drops the state of a slot that is skipped. `region` names it ("region
  // 'kv' (slot ...)" or "slot ..."), `why` says why it is skipped.
  virtual void Discard(const std::string& slot, const std::string& region,
                       const std::string& why) = 0;

  // Removes the memory of a slot that has no record. Returns what was
  // removed, for the note: "/dev/shm/rdmad/SLOT.mem",
  // "rdmad-mem-SLOT from the fd store".
  virtual std::string RemoveMemory(const std::string& slot) = 0;
};

// Adopts, skips or removes every slot listed (see the top of this file),
// adding to `found`. `records`: the slots with a record; `memories`: the
// slots with memory.
void RecoverSlots(const std::set<std::string>& records,
                  const std::set<std::string>& memories, SlotStorage& storage,
                  Recovery& found);

}  // namespace rdmad::state

#endif  // RDMAD_DAEMON_STATE_SLOT_RECOVERY_H_
