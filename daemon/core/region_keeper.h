// RegionKeeper: the seam through which daemon-owned named regions outlive
// the daemon process.
//
// With a keeper, the region table creates the memory of every daemon-owned
// named region through it: a file in a state directory, or a memfd handed to
// systemd's file descriptor store, together with a record of what the
// region is (name, size, owner, group, mode, export access). The next daemon
// reads them back and adopts each region under its old name
// (RegionTable::Restore). Session buffers never go through a keeper: they
// end with their session. Implementations live in daemon/state/; the core
// only sees this interface.
//
// Example:
//   RegionTable table(&registrar, limits, keeper);  // keeper: not owned
//   table.Allocate(caller, {.size = 1 << 20, .name = "kv",
//                           .daemon_owned = true});   // kept
//   table.Free(caller, {0, "kv"});                      // forgotten for good
#ifndef RDMAD_DAEMON_CORE_REGION_KEEPER_H_
#define RDMAD_DAEMON_CORE_REGION_KEEPER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/core/kept_region.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/core/region.h"
#include "daemon/core/shm_segment.h"

namespace rdmad::core {

// What a kept region is: everything the next daemon needs to adopt it.
struct KeptRegionInfo {
  std::string name;
  uint64_t size = 0;  // bytes asked for (the memory may be rounded up)
  RegionAcl acl;      // owner uid, group and mode
  RemoteAccess export_access = RemoteAccess::kNone;
  // The export's access list ("[UID@]PEER" entries); empty: any peer.
  std::vector<ExportGrant> export_allow;
};

// Memory for a new kept region, and the handle of its kept state.
struct KeptMemory {
  ShmSegment segment;
  std::unique_ptr<KeptRegion> kept;
};

// Creates the memory of new kept regions. Thread-safe.
class RegionKeeper {
 public:
  virtual ~RegionKeeper() = default;

  // Creates `info.size` bytes of memory that outlive this process, and a
  // record of `info` beside them. On error nothing is left behind.
  virtual absl::StatusOr<KeptMemory> Create(const KeptRegionInfo& info) = 0;

  // Where regions are kept, for logs: "state directory /dev/shm/rdmad".
  virtual std::string Describe() const = 0;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_REGION_KEEPER_H_
