#include "daemon/memory_releaser.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>

namespace rdmad {

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

bool MemoryReleaser::ReleaseIfGrown(uint64_t* reference,
                                    uint64_t threshold_bytes) {
  const uint64_t resident = ResidentBytes();
  if (resident == 0) return false;
  if (resident <= *reference + threshold_bytes) {
    if (resident < *reference) *reference = resident;
    return false;
  }
  bool trimmed = false;
  // Growth that is memory in use (more regions, more clients) is no
  // business of ours; only free memory the allocator sits on is returned.
  if (FreeHeldBytes() > threshold_bytes) {
    ::malloc_trim(0);
    trimmed = true;
  }
  *reference = ResidentBytes();
  return trimmed;
}

void MemoryReleaser::Loop() {
  uint64_t reference = ResidentBytes();
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

}  // namespace rdmad
