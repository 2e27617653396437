// MemoryReleaser: hands heap memory the daemon freed back to the kernel.
//
// Why: a burst of connections (hostile ones on the Peer and data ports, or
// just many clients) makes gRPC allocate per-connection buffers on many
// threads, hence in many malloc arenas. When the connections close, glibc
// keeps the freed memory in those arenas (only the top of each is ever
// trimmed), so the daemon's RSS stayed several MiB higher after every
// burst. Every `interval`, if the anonymous resident memory not in use by
// the heap grew by more than `threshold_bytes` since the last look and
// more than that is free but still held by the allocator
// (mallinfo2().fordblks), malloc_trim(0) returns the free pages. Memory in
// use does not count, so a look during a burst does not take the burst's
// peak as the new normal. An idle daemon costs one read of
// /proc/self/statm and one mallinfo2() per interval.
//
// Under the sanitizers, whose allocators are not glibc's, mallinfo2 sees
// nothing and nothing is done.
//
// Thread-safe; one thread, stopped by Stop() or the destructor.
#ifndef RDMAD_DAEMON_PROCESS_MEMORY_RELEASER_H_
#define RDMAD_DAEMON_PROCESS_MEMORY_RELEASER_H_

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rdmad::process {

struct MemoryReleaserOptions {
  absl::Duration interval = absl::Seconds(2);
  uint64_t threshold_bytes = 512ull << 10;
};

class MemoryReleaser {
 public:
  explicit MemoryReleaser(MemoryReleaserOptions options = {});
  ~MemoryReleaser();  // Stop()

  MemoryReleaser(const MemoryReleaser&) = delete;
  MemoryReleaser& operator=(const MemoryReleaser&) = delete;

  // Stops the thread and waits for it. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Heap bytes free but held by the allocator now.
  static uint64_t FreeHeldBytes();
  // This process's anonymous resident memory (resident minus file-backed
  // and shared pages, from /proc/self/statm), in bytes; 0 if unknown.
  static uint64_t ResidentBytes();
  // ResidentBytes() less the heap memory in use (mallinfo2 uordblks +
  // hblkhd): what the allocator holds without using, among other things.
  static uint64_t IdleResidentBytes();
  // One check: trims if IdleResidentBytes() grew by more than
  // `threshold_bytes` over `*reference` and as much is free in the heap;
  // then (and whenever it is below it) `*reference` becomes
  // IdleResidentBytes(). True if it trimmed.
  static bool ReleaseIfGrown(uint64_t* reference, uint64_t threshold_bytes);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  const MemoryReleaserOptions options_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar wake_;
  std::thread thread_;
};

}  // namespace rdmad::process

#endif  // RDMAD_DAEMON_PROCESS_MEMORY_RELEASER_H_
