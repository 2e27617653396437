#include "daemon/core/pinned_cap.h"

#include "absl/strings/str_cat.h"
#include "common/size.h"

namespace rdmad::core {

PinnedCap ChoosePinnedCap(bool pins_memory, uint64_t configured,
                          uint64_t memlock_limit, uint64_t physical_memory) {
  if (configured != 0) {
    return {configured, "config max_pinned_bytes"};
  }
  if (pins_memory && memlock_limit != 0) {
    return {memlock_limit,
            "the daemon's locked-memory limit (LimitMEMLOCK= in the unit, or "
            "ulimit -l)"};
  }
  return {physical_memory / 2,
          absl::StrCat("half of this node's ", HumanSize(physical_memory),
                       " of memory, as ",
                       pins_memory ? "the locked-memory limit is unlimited"
                                   : "no RDMA device pins regions",
                       "; set max_pinned_bytes to change it")};
}

uint64_t ChooseUidBytesQuota(std::optional<uint64_t> configured,
                             const PinnedCap& cap) {
  if (configured.has_value()) return *configured;
  return cap.bytes / 2;
}

}  // namespace rdmad::core
