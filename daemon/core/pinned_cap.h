// The cap on the bytes all regions together may hold, the share of it one
// uid may hold, and why they are what they are.
//
// Pinning is what the locked-memory limit (RLIMIT_MEMLOCK) is about: a
// verbs registration (ibv_reg_mr) pins every page of a region, and the
// kernel refuses to pin past the limit. A daemon without RDMA devices (TCP
// transport only) pins nothing, so the limit says nothing about it: a
// default `ulimit -l` of 8 MiB must not stop an 80 MiB region there. But
// regions are memory all the same, held by the daemon for whoever asked:
// where neither config max_pinned_bytes nor a locked-memory limit caps
// them (TCP only, or an unlimited limit), half of the node's memory does.
//
// Within the cap, one local user may hold half of it unless config
// quota_pinned_bytes_per_uid says otherwise, so that no one user can take
// all of it from the others.
#ifndef RDMAD_DAEMON_CORE_PINNED_CAP_H_
#define RDMAD_DAEMON_CORE_PINNED_CAP_H_

#include <cstdint>
#include <optional>
#include <string>

namespace rdmad::core {

struct PinnedCap {
  uint64_t bytes = 0;  // 0 = no cap
  std::string source;  // where it comes from, for status and errors
};

// `pins_memory`: regions are registered with RDMA devices (pinned).
// `configured`: config max_pinned_bytes (0 = unset). `memlock_limit`: the
// daemon's RLIMIT_MEMLOCK after raising it (0 = unlimited).
// `physical_memory`: the node's memory in bytes.
PinnedCap ChoosePinnedCap(bool pins_memory, uint64_t configured,
                          uint64_t memlock_limit, uint64_t physical_memory);

// The bytes one uid may hold (quota_pinned_bytes_per_uid): `configured`
// when the config sets it (0 = no quota), else half of `cap` (none when
// there is no cap).
uint64_t ChooseUidBytesQuota(std::optional<uint64_t> configured,
                             const PinnedCap& cap);

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_PINNED_CAP_H_
