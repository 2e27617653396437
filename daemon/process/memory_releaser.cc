#include "daemon/process/memory_releaser.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>

namespace rdmad::process {

MemoryReleaser::MemoryReleaser(MemoryReleaserOptions options)
    : options_(options) {
  thread_ = std::thread([this] { Loop(); });
}

MemoryReleaser::~MemoryReleaser() { Stop(); }

void MemoryReleaser::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.Signal();
  }
  if (thread_.joinable()) thread_.join();
}

uint64_t MemoryReleaser::FreeHeldBytes() {
  const struct mallinfo2 info = ::mallinfo2();
  return info.fordblks;
}

uint64_t MemoryReleaser::ResidentBytes() {
  std::FILE* statm = std::fopen("/proc/self/statm", "re");
  if (statm == nullptr) return 0;
  unsigned long long size = 0, resident = 0, shared = 0;
  const int read =
      std::fscanf(statm, "%llu %llu %llu", &size, &resident, &shared);
  std::fclose(statm);
  if (read != 3 || shared > resident) return 0;
  // Anonymous memory only: region pages (shared memfds) and code are not
  // the allocator's.
  return (resident - shared) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

uint64_t MemoryReleaser::IdleResidentBytes() {
  const uint64_t resident = ResidentBytes();
  if (resident == 0) return 0;
  const struct mallinfo2 info = ::mallinfo2();
  const uint64_t in_use = info.uordblks + info.hblkhd;
  return resident > in_use ? resident - in_use : 0;
}

bool MemoryReleaser::ReleaseIfGrown(uint64_t* reference,
                                    uint64_t threshold_bytes) {
  // Resident memory not in use: growth that is memory in use (more
  // regions, more clients, a burst of connections still open) is no
  // business of ours, and must not hide the memory it leaves free once it
  // ends. (Comparing resident memory alone, a look during a burst took its
  // peak as the new normal, and what the burst freed was never returned.)
  const uint64_t idle = IdleResidentBytes();
  if (idle <= *reference + threshold_bytes) {
    if (idle < *reference) *reference = idle;
    return false;
  }
  if (FreeHeldBytes() <= threshold_bytes) return false;  // not the heap's
  ::malloc_trim(0);
  *reference = IdleResidentBytes();
  return true;
}

void MemoryReleaser::Loop() {
  uint64_t reference = IdleResidentBytes();
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    wake_.WaitWithTimeout(&mu_, options_.interval);
    if (stopping_) break;
    // Not under the lock: trimming walks every arena.
    mu_.Unlock();
    ReleaseIfGrown(&reference, options_.threshold_bytes);
    mu_.Lock();
  }
}

}  // namespace rdmad::process
