// What a keeper finds at start: the regions an earlier daemon kept, ready
// to adopt, and those it had to skip, with why.
#ifndef RDMAD_DAEMON_STATE_RECOVERY_H_
#define RDMAD_DAEMON_STATE_RECOVERY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/core/region_keeper.h"
#include "daemon/core/shm_segment.h"

namespace rdmad::state {

// A kept region, mapped and checked, for RegionTable::Restore.
struct RecoveredRegion {
  core::KeptRegionInfo info;
  core::ShmSegment segment;
  std::unique_ptr<core::KeptRegion> kept;
};

// A kept region that was not adopted. Its state was put aside (a state
// directory's damaged/ folder) or removed (the fd store).
struct SkippedRegion {
  std::string region;  // "region 'kv' (slot 5f0c...)" or "slot 5f0c..."
  std::string why;
  uint64_t bytes = 0;  // its size, when the record said
};

struct Recovery {
  std::vector<RecoveredRegion> regions;
  std::vector<SkippedRegion> skipped;
  // Other things worth a log line (leftovers cleaned up, unknown files).
  std::vector<std::string> notes;
  // Things that were wrong and were put right, worth a warning (a file that
  // had grown past its region, cut back).
  std::vector<std::string> warnings;
};

// A keeper that can also hand back what an earlier daemon kept.
class RecoveringKeeper : public core::RegionKeeper {
 public:
  // Maps and checks every kept region; call once, at start, before any
  // Create. Damaged ones are skipped (and put aside) here already.
  virtual Recovery Recover() = 0;
  // keep_regions_on_restart false: removes every kept region, as if it had
  // been freed; returns how many there were. Call instead of Recover().
  virtual size_t DiscardAll() = 0;
  // Where KeptRegion::Discard puts a region's state, for messages:
  // "moved to /dev/shm/rdmad/damaged/", "removed from the fd store".
  virtual std::string DiscardedTo() const = 0;
};

}  // namespace rdmad::state

#endif  // RDMAD_DAEMON_STATE_RECOVERY_H_
