// KeptRegion: the handle of one region's state in a RegionKeeper (see
// region_keeper.h), owned by the Region. Apart from region_keeper.h so that
// region.h can hold one without a cycle.
#ifndef RDMAD_DAEMON_CORE_KEPT_REGION_H_
#define RDMAD_DAEMON_CORE_KEPT_REGION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/core/export_access_list.h"
#include "daemon/core/memory_registrar.h"

namespace rdmad::core {

struct RegionAcl;  // region.h, which includes this header

// The kept state (memory and record) of one region. Owned by its Region;
// destroying it leaves the state in place for the next daemon, which is what
// a shutdown wants. Thread-safe.
class KeptRegion {
 public:
  virtual ~KeptRegion() = default;

  // Rewrites the record with a new export access and access list (empty:
  // any peer), so that the next daemon exports the region the same way.
  // On error the old record stands. Does nothing once Forget() or
  // Discard() ran.
  virtual absl::Status SetExportAccess(
      RemoteAccess access, const std::vector<ExportGrant>& allow) = 0;

  // Rewrites the record with a new owner, group and mode (chmod, chgrp),
  // so that the next daemon gives the region the same permissions. On
  // error the old record stands. Does nothing once Forget() or Discard()
  // ran.
  virtual absl::Status SetAcl(const RegionAcl& acl) = 0;

  // The region was freed: its record and memory go for good (the memory
  // stays mapped by whoever still maps it). Idempotent.
  virtual void Forget() = 0;

  // The region could not be adopted (`why`): its state is put aside, never
  // to be adopted again, where an operator can still look at it (or, where
  // there is no such place, removed). Idempotent.
  virtual void Discard(const std::string& why) = 0;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_KEPT_REGION_H_
