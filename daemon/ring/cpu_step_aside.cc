#include "daemon/ring/cpu_step_aside.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "spdlog/spdlog.h"

namespace rdmad::ring {

bool CpuStepAside::Yielded(absl::Time now) {
  if (now - last_move_ < pause_) return false;
  if (now - window_start_ > kWindow) {
    window_start_ = now;
    yields_ = 0;
  }
  if (++yields_ < kYieldsBeforeMove) return false;
  yields_ = 0;
  // Needed again without a sleep since the last: back off. A move that
  // fails counts too, so one that cannot work is not tried at every yield.
  pause_ = slept_ ? kFirstPause : std::min(2 * pause_, kMaxPause);
  slept_ = false;
  last_move_ = now;
  const int cpu = ::sched_getcpu();
  if (cpu < 0 || !move_off_(cpu)) return false;
  ++moves_;
  spdlog::debug("ring engine moved off CPU {} (now on {}): a client waited "
                "on that CPU",
                cpu, ::sched_getcpu());
  return true;
}

bool CpuStepAside::MoveOff(int cpu) {
  // The mask's size must cover every CPU the kernel knows of, which may be
  // more than are online: grow it until sched_getaffinity accepts it.
  for (int cpus = 1024; cpus <= (1 << 20); cpus *= 2) {
    const size_t bytes = CPU_ALLOC_SIZE(cpus);
    std::unique_ptr<cpu_set_t, decltype(&::free)> allowed(CPU_ALLOC(cpus),
                                                          &::free);
    if (allowed == nullptr) return false;
    CPU_ZERO_S(bytes, allowed.get());
    if (::sched_getaffinity(0, bytes, allowed.get()) != 0) {
      if (errno == EINVAL) continue;  // too small a mask
      return false;
    }
    if (cpu >= cpus || !CPU_ISSET_S(cpu, bytes, allowed.get()) ||
        CPU_COUNT_S(bytes, allowed.get()) < 2) {
      return false;
    }
    std::unique_ptr<cpu_set_t, decltype(&::free)> elsewhere(CPU_ALLOC(cpus),
                                                            &::free);
    if (elsewhere == nullptr) return false;
    std::memcpy(elsewhere.get(), allowed.get(), bytes);
    CPU_CLR_S(cpu, bytes, elsewhere.get());
    if (::sched_setaffinity(0, bytes, elsewhere.get()) != 0) return false;
    // Back to what it was: the thread stays where the kernel moved it.
    if (::sched_setaffinity(0, bytes, allowed.get()) != 0) {
      spdlog::warn("ring engine: cannot restore its CPU affinity: {}",
                   std::strerror(errno));
    }
    return true;
  }
  return false;
}

}  // namespace rdmad::ring
