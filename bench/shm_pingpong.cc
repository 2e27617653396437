// shm_pingpong: the floor for rdmad's shared-memory ring on this machine.
//
// Two processes (fork) share one memfd mapping (MAP_SHARED) and bounce an
// 8-byte message back and forth, waking each other the way the client
// library and the daemon's ring engine do (common/queue_layout.h):
//
//   pinger ("client", client/queue.cc Queue::Wait): after sending, busy-polls
//     for --client-spin-us (default 30, the client's kSpin), or polls
//     between sched_yield calls as long if the ponger said it runs on the
//     pinger's CPU (saying so: `client_cpu`), then raises its `waiting`
//     flag (saying on which CPU), looks once more and sleeps in poll(2) on
//     its eventfd;
//   ponger ("engine", daemon/runtime/event_loop.cc + ring engine): polls
//     while there is work and for --engine-spin-us (default 50, the daemon's
//     engine_spin_us) after it, then raises its `sleeping` flag, looks once
//     more and sleeps in epoll_wait(2) on its doorbell eventfd; it says
//     which CPU it runs on whenever that changes, and yields (sched_yield)
//     after answering a pinger that waits on its own CPU, asleep or
//     yielding; one that keeps yielding there makes it step aside to
//     another CPU (daemon/ring/cpu_step_aside.h).
//   Each side writes the other's eventfd only when it sees that flag after
//   publishing (a sequentially consistent store, then load, as in
//   common/queue_ring.cc).
//
// Each message is 8 bytes written into its own cache line, then a 32-bit
// sequence number published with release order. Prints one line:
//   shm_pingpong iters=N p50_us=.. p99_us=.. mean_us=.. rtt_per_s=..
// (--json: the same as a JSON object). With --pause-us N the pinger waits
// N us between round trips, so both sides go to sleep: the wake-up path's
// cost (eventfd + scheduler) instead of the spinning one.
//
//   shm_pingpong [--iters N] [--warmup N] [--client-spin-us N]
//                [--engine-spin-us N] [--pause-us N] [--json]
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/tool_flags.h"
#include "daemon/ring/cpu_step_aside.h"

namespace {

using ::rdmad::ToolFlags;
using Clock = std::chrono::steady_clock;

// The shared page: each side's index and flag on a cache line of its own,
// as in queue::QueueHeader.
struct alignas(64) Shared {
  alignas(64) std::atomic<uint32_t> ping_seq;  // pinger writes
  uint64_t ping_payload;
  alignas(64) std::atomic<uint32_t> pong_seq;  // ponger writes
  uint64_t pong_payload;
  alignas(64) std::atomic<uint32_t> engine_sleeping;  // ponger writes
  alignas(64) std::atomic<uint32_t> client_waiting;   // pinger writes
  // Where the pinger waits (asleep or yielding); -1 while it busy-polls.
  std::atomic<int32_t> client_cpu;                    // pinger writes
  alignas(64) std::atomic<int32_t> engine_cpu;        // ponger writes
  alignas(64) std::atomic<uint32_t> stop;             // pinger writes
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

struct Options {
  long iters = 100000;
  long warmup = 10000;
  long client_spin_us = 30;
  long engine_spin_us = 50;
  long pause_us = 0;
  bool json = false;
};

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "shm_pingpong: %s: %s\n", what, std::strerror(errno));
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  ToolFlags("shm_pingpong",
            "[--iters N] [--warmup N] [--client-spin-us N] "
            "[--engine-spin-us N] [--pause-us N] [--json]")
      .Number("--iters", &o.iters, 1L)
      .Number("--warmup", &o.warmup)
      .Number("--client-spin-us", &o.client_spin_us)
      .Number("--engine-spin-us", &o.engine_spin_us)
      .Number("--pause-us", &o.pause_us)
      .Switch("--json", &o.json)
      .Parse(argc, argv);
  return o;
}

void Signal(int fd) {
  const uint64_t one = 1;
  // EAGAIN (counter saturated) still leaves it readable.
  [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof(one));
}

void Drain(int fd) {
  uint64_t count;
  [[maybe_unused]] ssize_t n = ::read(fd, &count, sizeof(count));
}

// The engine's side: answer every ping; spin, then sleep on the doorbell.
void Ponger(Shared* s, int doorbell, int wakeup, const Options& o) {
  const int epoll = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) Die("epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (::epoll_ctl(epoll, EPOLL_CTL_ADD, doorbell, &ev) != 0) Die("epoll_ctl");
  const auto spin = std::chrono::microseconds(o.engine_spin_us);
  uint32_t seen = 0;
  int cpu = -1;
  rdmad::ring::CpuStepAside step_aside;
  Clock::time_point spin_until = Clock::now() + spin;
  while (s->stop.load(std::memory_order_relaxed) == 0) {
    if (const int now_on = ::sched_getcpu(); now_on != cpu) {
      cpu = now_on;
      s->engine_cpu.store(cpu, std::memory_order_relaxed);
    }
    const uint32_t seq = s->ping_seq.load(std::memory_order_acquire);
    if (seq != seen) {
      seen = seq;
      s->pong_payload = s->ping_payload + 1;
      s->pong_seq.store(seq, std::memory_order_seq_cst);
      const bool asleep =
          s->client_waiting.load(std::memory_order_seq_cst) != 0;
      if (asleep) Signal(wakeup);
      if (s->client_cpu.load(std::memory_order_relaxed) == cpu) {
        if (!asleep && step_aside.Yielded(absl::Now())) {
          cpu = ::sched_getcpu();
          s->engine_cpu.store(cpu, std::memory_order_relaxed);
        } else {
          ::sched_yield();
        }
      }
      spin_until = Clock::now() + spin;
      continue;
    }
    if (Clock::now() < spin_until) continue;
    s->engine_sleeping.store(1, std::memory_order_seq_cst);
    if (s->ping_seq.load(std::memory_order_seq_cst) != seen ||
        s->stop.load(std::memory_order_relaxed) != 0) {
      s->engine_sleeping.store(0, std::memory_order_relaxed);
      continue;
    }
    epoll_event out;
    // Bounded, as the daemon's loop is (kMaxSleep).
    const int n = ::epoll_wait(epoll, &out, 1, 1000);
    s->engine_sleeping.store(0, std::memory_order_relaxed);
    if (n > 0) Drain(doorbell);
    spin_until = Clock::now() + spin;
  }
  ::close(epoll);
}

// RoundTrip's wait for the pong of `seq`: false if none came within 10 s.
bool WaitForPong(Shared* s, int wakeup, uint32_t seq,
                 Clock::time_point start, bool yield, const Options& o) {
  const Clock::time_point spin_until =
      start + std::chrono::microseconds(o.client_spin_us);
  const Clock::time_point give_up = start + std::chrono::seconds(10);
  while (s->pong_seq.load(std::memory_order_acquire) != seq) {
    if (yield) ::sched_yield();
    const Clock::time_point now = Clock::now();
    if (now < spin_until) continue;
    if (now > give_up) return false;
    s->client_cpu.store(::sched_getcpu(), std::memory_order_relaxed);
    s->client_waiting.store(1, std::memory_order_seq_cst);
    if (s->pong_seq.load(std::memory_order_seq_cst) == seq) {
      s->client_waiting.store(0, std::memory_order_relaxed);
      break;
    }
    pollfd p{wakeup, POLLIN, 0};
    const int rc = ::poll(&p, 1, 1000);
    s->client_waiting.store(0, std::memory_order_relaxed);
    if (rc > 0) Drain(wakeup);
  }
  return true;
}

// The client's side: one round trip; returns false if the ponger never
// answered (within 10 s).
bool RoundTrip(Shared* s, int doorbell, int wakeup, uint32_t seq,
               const Options& o) {
  s->ping_payload = seq;
  s->ping_seq.store(seq, std::memory_order_seq_cst);
  if (s->engine_sleeping.load(std::memory_order_seq_cst) != 0) {
    Signal(doorbell);
  }
  const Clock::time_point start = Clock::now();
  const int here = ::sched_getcpu();
  const bool yield = s->engine_cpu.load(std::memory_order_relaxed) == here;
  // Says where it waits while it does, as CompletionConsumer does: -1
  // (stored only if not already) while it busy-polls or runs.
  if (yield) s->client_cpu.store(here, std::memory_order_relaxed);
  const bool answered = WaitForPong(s, wakeup, seq, start, yield, o);
  if (s->client_cpu.load(std::memory_order_relaxed) != -1) {
    s->client_cpu.store(-1, std::memory_order_relaxed);
  }
  return answered && s->pong_payload == uint64_t{seq} + 1;
}

void PauseFor(long us) {
  if (us <= 0) return;
  timespec ts{us / 1000000, (us % 1000000) * 1000};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  const int memfd = ::memfd_create("shm_pingpong", MFD_CLOEXEC);
  if (memfd < 0) Die("memfd_create");
  if (::ftruncate(memfd, 4096) != 0) Die("ftruncate");
  void* map = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (map == MAP_FAILED) Die("mmap");
  Shared* s = new (map) Shared();
  s->engine_cpu.store(-1);
  s->client_cpu.store(-1);
  const int doorbell = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  const int wakeup = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (doorbell < 0 || wakeup < 0) Die("eventfd");

  const pid_t child = ::fork();
  if (child < 0) Die("fork");
  if (child == 0) {
    Ponger(s, doorbell, wakeup, o);
    ::_exit(0);
  }

  std::vector<int64_t> ns;
  ns.reserve(static_cast<size_t>(o.iters));
  uint32_t seq = 0;
  bool ok = true;
  for (long i = 0; i < o.warmup && ok; ++i) {
    ok = RoundTrip(s, doorbell, wakeup, ++seq, o);
    PauseFor(o.pause_us);
  }
  const Clock::time_point begin = Clock::now();
  Clock::duration paused{};
  for (long i = 0; i < o.iters && ok; ++i) {
    const Clock::time_point t0 = Clock::now();
    ok = RoundTrip(s, doorbell, wakeup, ++seq, o);
    const Clock::time_point t1 = Clock::now();
    ns.push_back(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    if (o.pause_us > 0) {
      PauseFor(o.pause_us);
      paused += Clock::now() - t1;
    }
  }
  const Clock::duration elapsed = Clock::now() - begin - paused;
  s->stop.store(1, std::memory_order_seq_cst);
  Signal(doorbell);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!ok) {
    std::fprintf(stderr,
                 "shm_pingpong: round trip %u lost or corrupted (no answer "
                 "within 10 s, or a wrong payload)\n",
                 seq);
    return 1;
  }

  std::sort(ns.begin(), ns.end());
  auto percentile = [&](double p) {
    // Nearest rank, as rdmactl bench computes it (bench_stats.cc).
    size_t rank = static_cast<size_t>(
        std::ceil(p / 100.0 * static_cast<double>(ns.size()) - 1e-9));
    rank = std::clamp<size_t>(rank, 1, ns.size());
    return static_cast<double>(ns[rank - 1]) / 1000.0;
  };
  double sum = 0;
  for (int64_t v : ns) sum += static_cast<double>(v);
  const double mean_us = sum / static_cast<double>(ns.size()) / 1000.0;
  const double seconds = std::chrono::duration<double>(elapsed).count();
  const double rate =
      seconds > 0 ? static_cast<double>(ns.size()) / seconds : 0.0;
  if (o.json) {
    std::printf(
        "{\"iters\": %zu, \"p50_us\": %.3f, \"p99_us\": %.3f, "
        "\"p999_us\": %.3f, \"mean_us\": %.3f, \"rtt_per_s\": %.0f, "
        "\"client_spin_us\": %ld, \"engine_spin_us\": %ld, "
        "\"pause_us\": %ld}\n",
        ns.size(), percentile(50), percentile(99), percentile(99.9), mean_us,
        rate, o.client_spin_us, o.engine_spin_us, o.pause_us);
  } else {
    std::printf(
        "shm_pingpong iters=%zu p50_us=%.3f p99_us=%.3f p999_us=%.3f "
        "mean_us=%.3f rtt_per_s=%.0f\n",
        ns.size(), percentile(50), percentile(99), percentile(99.9), mean_us,
        rate);
  }
  return 0;
}
