#include "daemon/core/pinned_cap.h"

namespace rdmad::core {

PinnedCap ChoosePinnedCap(bool pins_memory, uint64_t configured,
                          uint64_t memlock_limit) {
  if (configured != 0) {
    return {configured, "config max_pinned_bytes"};
  }
  if (!pins_memory) {
    return {0,
            "no RDMA device, so nothing is pinned; set max_pinned_bytes or "
            "the quota_* fields to cap regions"};
  }
  if (memlock_limit == 0) {
    return {0, "the locked-memory limit is unlimited"};
  }
  return {memlock_limit,
          "the daemon's locked-memory limit (LimitMEMLOCK= in the unit, or "
          "ulimit -l)"};
}

}  // namespace rdmad::core
