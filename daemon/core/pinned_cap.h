// The cap on the bytes all regions together may hold, and why it is what
// it is.
//
// Pinning is what the locked-memory limit (RLIMIT_MEMLOCK) is about: a
// verbs registration (ibv_reg_mr) pins every page of a region, and the
// kernel refuses to pin past the limit. A daemon without RDMA devices (TCP
// transport only) pins nothing, so the limit says nothing about it: a
// default `ulimit -l` of 8 MiB must not stop an 80 MiB region there. On
// such a daemon only config max_pinned_bytes (and the per-uid quotas) cap
// the regions.
#ifndef RDMAD_DAEMON_CORE_PINNED_CAP_H_
#define RDMAD_DAEMON_CORE_PINNED_CAP_H_

#include <cstdint>
#include <string>

namespace rdmad::core {

struct PinnedCap {
  uint64_t bytes = 0;  // 0 = no cap
  std::string source;  // where it comes from, for status and errors
};

// `pins_memory`: regions are registered with RDMA devices (pinned).
// `configured`: config max_pinned_bytes (0 = unset). `memlock_limit`: the
// daemon's RLIMIT_MEMLOCK after raising it (0 = unlimited).
PinnedCap ChoosePinnedCap(bool pins_memory, uint64_t configured,
                          uint64_t memlock_limit);

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_PINNED_CAP_H_
