// KeptRegions: the daemon's side of keeping named regions across restarts
// (docs/RESTART.md). At start it picks the keeper the configuration asks
// for and adopts what an earlier daemon kept into the region table, before
// any server starts; it says what it adopted and skipped, with counts and
// bytes, and at shutdown what it kept.
//
//   state_dir set          -> a state directory (StateDirKeeper)
//   else under systemd     -> the unit's fd store (FdStoreKeeper)
//   else                   -> none: named regions end with the daemon
//   keep_regions_on_restart: false -> none, and what an earlier run kept is
//                              discarded
//
// Example (Daemon::Start):
//   RDMAD_ASSIGN_OR_RETURN(auto kept, state::KeptRegions::Open(config));
//   auto regions = std::make_unique<core::RegionTable>(
//       registrar, limits, kept->keeper());
//   kept->Adopt(*regions);
//
// Not thread-safe: Open and Adopt run once, at start.
#ifndef RDMAD_DAEMON_STATE_KEPT_REGIONS_H_
#define RDMAD_DAEMON_STATE_KEPT_REGIONS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/core/region_table.h"
#include "daemon/state/recovery.h"
#include "rdmad/v1/config.pb.h"

namespace rdmad::state {

struct AdoptionSummary {
  uint64_t adopted = 0;
  uint64_t adopted_bytes = 0;
  uint64_t skipped = 0;
};

class KeptRegions {
 public:
  // Takes the descriptors systemd passed (whatever the mode: they are
  // rdmad's to close) and opens the keeper. Errors: a state_dir that cannot
  // be used (FAILED_PRECONDITION saying why and what to do).
  static absl::StatusOr<std::unique_ptr<KeptRegions>> Open(
      const v1::DaemonConfig& config);

  // For the region table; null when named regions end with the daemon.
  core::RegionKeeper* keeper() const { return keeper_.get(); }

  // Adopts every region the earlier daemon kept into `regions`
  // (RegionTable::Restore) and logs: one line with what was adopted (count,
  // bytes) and skipped, one warning per region skipped with why. Once.
  AdoptionSummary Adopt(core::RegionTable& regions);

  // The shutdown line, e.g. "kept 16 named region(s) (1Gi) in state
  // directory /dev/shm/rdmad for the next start; released 2 other
  // region(s)", or "released 3 daemon-owned region(s)" when none is kept.
  std::string ShutdownSummary(const core::RegionTotals& left) const;

 private:
  explicit KeptRegions(std::unique_ptr<RecoveringKeeper> keeper);
  std::unique_ptr<RecoveringKeeper> keeper_;
};

}  // namespace rdmad::state

#endif  // RDMAD_DAEMON_STATE_KEPT_REGIONS_H_
