// CopyRegionBytes: the daemon's own copy between two regions (a transfer
// whose target is a region of this same daemon).
//
// Most region memory is a sealed memfd that nobody can shrink, and is
// copied with memmove. A region kept in a state directory is a tmpfs file,
// which cannot be sealed: a client that maps it holds a descriptor it could
// ftruncate, and a CPU copy from the vanished pages would kill the daemon
// with SIGBUS. Such memory is copied by the kernel instead
// (process_vm_readv on this process), where a missing page is an EFAULT:
// the copy fails with DATA_LOSS and the daemon carries on. A client's
// dma-buf is copied the same way, bracketed by DMA_BUF_IOCTL_SYNC, and one
// the daemon could not map for the CPU (GPU memory) is refused with
// FAILED_PRECONDITION: only an RDMA device can move its bytes.
#ifndef RDMAD_DAEMON_CORE_REGION_COPY_H_
#define RDMAD_DAEMON_CORE_REGION_COPY_H_

#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "daemon/core/region.h"

namespace rdmad::core {

// The kernel copy on its own, for memory that may have been truncated:
// copies `length` bytes from `from` to `to` (which may overlap); DATA_LOSS
// when a page of either is no longer there.
absl::Status CopyShrinkableMemory(char* to, const char* from, uint64_t length);

// The copy of CopyRegionBytes when either region needs the kernel's copy
// (can_shrink): checks that the CPU can reach both, brackets dma-bufs with
// DMA_BUF_IOCTL_SYNC, and copies with CopyShrinkableMemory.
absl::Status CopyCarefully(const Region& to, uint64_t to_offset,
                           const Region& from, uint64_t from_offset,
                           uint64_t length);

// Copies `length` bytes from `from` at `from_offset` to `to` at `to_offset`.
// The ranges may overlap (the same region). The caller has checked both
// ranges against the regions' sizes. Thread-safe. Inline: a ring's 8-byte
// copy is the common case, and a call per layer cost more than the copy.
inline absl::Status CopyRegionBytes(const Region& to, uint64_t to_offset,
                                    const Region& from, uint64_t from_offset,
                                    uint64_t length) {
  if (!to.can_shrink() && !from.can_shrink()) {
    std::memmove(to.data() + to_offset, from.data() + from_offset, length);
    return absl::OkStatus();
  }
  return CopyCarefully(to, to_offset, from, from_offset, length);
}

// Copies `length` bytes from memory of this process outside any region (a
// socket's receive buffer) to `to`, inside `region`: with memcpy, or where
// the region can shrink by the kernel (CopyShrinkableMemory), so that a
// page taken away fails the copy with DATA_LOSS instead of killing the
// daemon. What readv straight into the region would have done.
inline absl::Status CopyIntoRegion(const Region& region, char* to,
                                   const void* from, uint64_t length) {
  if (!region.can_shrink()) {
    std::memcpy(to, from, length);
    return absl::OkStatus();
  }
  return CopyShrinkableMemory(to, static_cast<const char*>(from), length);
}

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_REGION_COPY_H_
