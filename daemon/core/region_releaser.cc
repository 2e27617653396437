#include "daemon/core/region_releaser.h"

#include <pthread.h>

#include <string>
#include <system_error>
#include <utility>

#include "common/serving_thread.h"
#include "daemon/core/region.h"
#include "spdlog/spdlog.h"

namespace rdmad::core {

RegionReleaser::~RegionReleaser() {
  std::thread thread;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_.Signal();
    thread = std::move(thread_);
  }
  // The thread tears down everything handed over before it returns (no
  // hand-over can come now: that takes a reference to this object).
  if (thread.joinable()) thread.join();
}

void RegionReleaser::Release(std::unique_ptr<Region> region) {
  std::string cannot_start;
  {
    absl::MutexLock lock(&mu_);
    ++handed_over_;
    if (!thread_.joinable()) {
      try {
        thread_ = std::thread([this] { Loop(); });
      } catch (const std::system_error& e) {
        cannot_start = e.what();
      }
    }
    if (cannot_start.empty()) {
      pending_.push_back(std::move(region));
      work_.Signal();
      return;
    }
  }
  // No thread to hand it to: the caller pays, as it would without one.
  spdlog::warn("cannot start the region release thread ({}): tearing down "
               "{} on this thread",
               cannot_start, region->Label());
  region.reset();
  absl::MutexLock lock(&mu_);
  ++released_;
  idle_.SignalAll();
}

void RegionReleaser::Loop() {
  ::pthread_setname_np(::pthread_self(), "rdmad-release");
  for (;;) {
    std::vector<std::unique_ptr<Region>> batch;
    {
      absl::MutexLock lock(&mu_);
      while (pending_.empty() && !stopping_) work_.Wait(&mu_);
      if (pending_.empty()) return;  // stopping, and nothing left
      batch.swap(pending_);
    }
    const size_t n = batch.size();
    batch.clear();  // the teardowns themselves, outside the lock
    absl::MutexLock lock(&mu_);
    released_ += n;
    idle_.SignalAll();
  }
}

uint64_t RegionReleaser::handed_over() const {
  absl::MutexLock lock(&mu_);
  return handed_over_;
}

uint64_t RegionReleaser::released() const {
  absl::MutexLock lock(&mu_);
  return released_;
}

bool RegionReleaser::busy() const {
  absl::MutexLock lock(&mu_);
  return released_ != handed_over_;
}

bool RegionReleaser::WaitIdle(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (released_ != handed_over_) {
    if (idle_.WaitWithDeadline(&mu_, deadline)) break;  // timed out
  }
  return released_ == handed_over_;
}

void RegionReleaser::Deleter::operator()(Region* region) const {
  if (OnServingThread()) {
    if (std::shared_ptr<RegionReleaser> r = releaser.lock()) {
      r->Release(std::unique_ptr<Region>(region));
      return;
    }
  }
  delete region;
}

}  // namespace rdmad::core
