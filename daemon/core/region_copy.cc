#include "daemon/core/region_copy.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace rdmad::core {
namespace {

// Bounce buffer size for overlapping ranges.
constexpr uint64_t kChunk = 1 << 20;

// One kernel copy of non-overlapping ranges, repeated over partial results.
absl::Status KernelCopy(char* to, const char* from, uint64_t length) {
  uint64_t done = 0;
  while (done < length) {
    iovec local{to + done, static_cast<size_t>(length - done)};
    iovec remote{const_cast<char*>(from + done),
                 static_cast<size_t>(length - done)};
    const ssize_t n = ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EFAULT;
      if (error == EFAULT) {
        return absl::DataLossError(absl::StrCat(
            "region memory ", done,
            " bytes into the copy is gone: its "
            "backing file in the state directory was truncated (a client "
            "holding its descriptor can do that); free the region and create "
            "it again"));
      }
      return absl::ErrnoToStatus(error, "process_vm_readv (region copy)");
    }
    done += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CopyShrinkableMemory(char* to, const char* from, uint64_t length) {
  if (length == 0 || to == from) return absl::OkStatus();
  const bool overlap = to < from + length && from < to + length;
  if (!overlap) return KernelCopy(to, from, length);
  // Through a bounce buffer, in the order memmove would use, so that no
  // source byte is overwritten before it is read.
  auto bounce = std::make_unique<char[]>(std::min(length, kChunk));
  const bool backward = to > from;
  for (uint64_t left = length; left > 0;) {
    const uint64_t n = std::min(left, kChunk);
    const uint64_t at = backward ? left - n : length - left;
    if (absl::Status s = KernelCopy(bounce.get(), from + at, n); !s.ok()) {
      return s;
    }
    if (absl::Status s = KernelCopy(to + at, bounce.get(), n); !s.ok()) {
      return s;
    }
    left -= n;
  }
  return absl::OkStatus();
}

absl::Status CopyCarefully(const Region& to, uint64_t to_offset,
                           const Region& from, uint64_t from_offset,
                           uint64_t length) {
  for (const Region* region : {&to, &from}) {
    if (!region->memory().cpu_mapped()) {
      return absl::FailedPreconditionError(absl::StrCat(
          region->Label(), " is a dma-buf this daemon cannot map for the CPU (",
          region->memory().cpu_map_error(), "): only an RDMA device can move "
          "its bytes, and a copy inside one daemon has none. Move it to or "
          "from a region of another daemon over verbs"));
    }
  }
  to.memory().BeginCpuAccess();
  if (&from != &to) from.memory().BeginCpuAccess();
  absl::Status copied = CopyShrinkableMemory(
      to.data() + to_offset, from.data() + from_offset, length);
  if (&from != &to) from.memory().EndCpuAccess();
  to.memory().EndCpuAccess();
  if (absl::IsDataLoss(copied) &&
      (to.memory().is_dmabuf() || from.memory().is_dmabuf())) {
    return absl::DataLossError(
        "a dma-buf's pages went away during a copy (its exporter took them "
        "back): free the region and register the dma-buf again");
  }
  return copied;
}

}  // namespace rdmad::core
