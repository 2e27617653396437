// RegionReleaser: tears down the regions whose last reference a serving
// thread dropped, on a thread of its own.
//
// Why: a Region's teardown unmaps its memory, closes its memfd (which frees
// its pages once no client maps them either) and deregisters its memory
// regions. For a region whose pages were touched that took 25 ms at 64 MiB
// and 430 ms at 1 GiB on these machines. Whoever drops the last reference
// pays: the region table (FreeRegion), a transfer that held it while in
// flight, or a ring queue's region cache (core::CachedRegion), which the
// engine empties on its loop when a region is freed. On an event loop
// (common/serving_thread.h) every client and peer that loop serves would
// wait that long, so there the region is handed to this thread instead.
// Anywhere else (a gRPC handler, a test) it is torn down at once, so that
// FreeRegion returning still means the memory is gone when nothing else
// held it.
//
// The RegionTable owns its releaser; its regions hold it weakly (Deleter),
// so a region that outlives the table is torn down where it is dropped.
// Destruction tears down what is still handed over, then joins the thread.
//
// Thread-safe; the thread starts at the first hand-over.
#ifndef RDMAD_DAEMON_CORE_REGION_RELEASER_H_
#define RDMAD_DAEMON_CORE_REGION_RELEASER_H_

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rdmad::core {

class Region;

class RegionReleaser {
 public:
  RegionReleaser() = default;
  ~RegionReleaser();

  RegionReleaser(const RegionReleaser&) = delete;
  RegionReleaser& operator=(const RegionReleaser&) = delete;

  // Tears `region` down on the releaser's thread (at once, here, if that
  // thread cannot be started).
  void Release(std::unique_ptr<Region> region) ABSL_LOCKS_EXCLUDED(mu_);

  // Regions handed over, and of those the ones torn down, so far.
  uint64_t handed_over() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t released() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a region handed over is not torn down yet.
  bool busy() const ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until every region handed over so far is torn down; false if
  // that took longer than `timeout`.
  bool WaitIdle(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  // The deleter of the table's regions: on a serving thread, while the
  // releaser lives, it hands the region over; otherwise deletes it.
  struct Deleter {
    std::weak_ptr<RegionReleaser> releaser;
    void operator()(Region* region) const;
  };

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  absl::CondVar work_;  // pending_ or stopping_ changed
  absl::CondVar idle_;  // released_ changed
  std::vector<std::unique_ptr<Region>> pending_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t handed_over_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t released_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_REGION_RELEASER_H_
