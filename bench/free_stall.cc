// rdmad_free_stall_bench: how long one client's operations wait while
// another client frees a large region its queue used.
//
// The ring engine serves every queue on its loop. A queue's region cache
// holds the regions its operations used, and when one is freed the engine
// empties the cache on its loop: if that was the last reference, the
// region's teardown (unmapping it, closing its memfd, which frees its
// pages, deregistering it) would run there, and every queue on the loop
// would wait for it. rdmad hands that teardown to a thread of its own
// (core::RegionReleaser). This measures what a bystander sees:
//
//   prober  one queue, 8-byte WRITEs to --region one at a time, for the
//           whole run; every latency recorded.
//   freer   another client and queue: --rounds times, creates a named
//           region of --size, maps it, touches every page, unmaps it,
//           WRITEs 8 bytes into it (so its queue's cache holds it), and
//           frees it. Its pages are then freed by whoever drops the
//           region last: the engine, when it empties its cache.
//
// Reference, same run: the teardown itself, timed in this process (a
// memfd of --size mapped, touched, unmapped and closed), the stall the
// prober would see if the engine paid it.
//
// Prints the prober's p50, p99, p99.9 and max, and the reference. Exits 1
// when the prober's max is half the reference or more (the engine paid a
// teardown), 2 on errors.
//
//   rdmad_free_stall_bench --socket PATH --region NAME [--size MiB]
//                          [--rounds N] [--json]
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/rdmactl/bench_stats.h"
#include "common/tool_flags.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"

namespace {

using ::rdmad::ToolFlags;
struct Options {
  std::string socket;
  std::string region;
  uint64_t size_mib = 256;
  uint64_t rounds = 5;
  bool json = false;
};

[[noreturn]] void Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "rdmad_free_stall_bench: %s: %s\n", what.c_str(),
               s.ToString().c_str());
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  ToolFlags flags("rdmad_free_stall_bench",
                  "--socket PATH --region NAME [--size MiB] [--rounds N] "
                  "[--json]");
  flags.Text("--socket", &o.socket)
      .Text("--region", &o.region)
      .Number<uint64_t>("--size", &o.size_mib, 1)
      .Number<uint64_t>("--rounds", &o.rounds, 1)
      .Switch("--json", &o.json);
  flags.Parse(argc, argv);
  if (o.socket.empty() || o.region.empty()) {
    flags.Fail("--socket and --region are required");
  }
  return o;
}

// A client with a queue and --region opened as a remote handle.
struct Side {
  std::unique_ptr<rdmad::Client> client;
  rdmad::RemoteHandle target;
  std::unique_ptr<rdmad::Queue> queue;

  static Side Open(const Options& o) {
    Side s;
    auto client = rdmad::Client::Connect({.socket_path = o.socket});
    if (!client.ok()) Fail("connect", client.status());
    s.client = *std::move(client);
    auto target = s.client->OpenRemote({.name = o.region});
    if (!target.ok()) Fail("open " + o.region, target.status());
    s.target = *std::move(target);
    auto queue = s.client->OpenQueue();
    if (!queue.ok()) Fail("open a queue", queue.status());
    s.queue = *std::move(queue);
    return s;
  }

  // One 8-byte WRITE from `local` to `to`, waited for.
  void Write(const rdmad::Buffer& local, const rdmad::RemoteHandle& to) {
    const rdmad::Op op{.kind = rdmad::Op::Kind::kWrite,
                       .local = &local,
                       .remote = &to,
                       .length = 8};
    auto done = queue->Run(absl::MakeConstSpan(&op, 1));
    if (!done.ok()) Fail("write", done.status());
  }
};

// The teardown the engine would pay: a touched memfd of `bytes`, unmapped
// and closed.
absl::Duration TeardownReference(uint64_t bytes) {
  const int fd = ::memfd_create("rdmad-free-stall-reference", 0);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    Fail("memfd", absl::ErrnoToStatus(errno, "memfd_create/ftruncate"));
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) Fail("mmap", absl::ErrnoToStatus(errno, "mmap"));
  std::memset(p, 1, bytes);
  const absl::Time start = absl::Now();
  ::munmap(p, bytes);
  ::close(fd);
  return absl::Now() - start;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  const uint64_t bytes = o.size_mib << 20;
  const absl::Duration reference = TeardownReference(bytes);

  Side prober = Side::Open(o);
  auto probe_buffer = prober.client->Allocate(4096);
  if (!probe_buffer.ok()) Fail("allocate the prober's buffer", probe_buffer.status());
  std::atomic<bool> stop{false};
  std::vector<int64_t> latencies;
  latencies.reserve(1 << 22);
  std::thread probe([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const absl::Time start = absl::Now();
      prober.Write(*probe_buffer, prober.target);
      latencies.push_back(absl::ToInt64Nanoseconds(absl::Now() - start));
    }
  });

  Side freer = Side::Open(o);
  auto source = freer.client->Allocate(4096);
  if (!source.ok()) Fail("allocate the freer's buffer", source.status());
  absl::Duration free_calls;
  for (uint64_t r = 0; r < o.rounds; ++r) {
    absl::SleepFor(absl::Milliseconds(100));
    const std::string name = absl::StrCat("free-stall-", ::getpid(), "-", r);
    auto created = freer.client->CreateRegion(name, bytes,
                                              rdmad::Access::kReadWrite);
    if (!created.ok()) Fail("create " + name, created.status());
    {
      auto view = freer.client->MapRegion(name);
      if (!view.ok()) Fail("map " + name, view.status());
      std::memset(view->data(), 0x5a, view->size());
    }  // unmapped: the daemon's mapping is the pages' last
    auto handle = freer.client->OpenRemote({.name = name});
    if (!handle.ok()) Fail("open " + name, handle.status());
    freer.Write(*source, *handle);  // its queue's cache now holds it
    const absl::Time start = absl::Now();
    if (absl::Status s = freer.client->FreeRegion(name); !s.ok()) {
      Fail("free " + name, s);
    }
    free_calls += absl::Now() - start;
  }
  absl::SleepFor(absl::Milliseconds(500));  // the last teardown, wherever
  stop.store(true);
  probe.join();

  const size_t ops = latencies.size();
  std::sort(latencies.begin(), latencies.end());
  const auto us = [&](double percent) {
    return rdmad::rdmactl::Percentile(latencies, percent) / 1000.0;
  };
  const double p50 = us(50);
  const double p99 = us(99);
  const double p999 = us(99.9);
  const double max_us = us(100);
  const double ref_us = absl::ToDoubleMicroseconds(reference);
  const double free_us =
      absl::ToDoubleMicroseconds(free_calls) / static_cast<double>(o.rounds);
  const bool stalled = max_us >= ref_us / 2;
  if (o.json) {
    std::printf(
        "{\"size_mib\": %llu, \"rounds\": %llu, \"probe_ops\": %zu, "
        "\"probe_p50_us\": %.2f, \"probe_p99_us\": %.2f, "
        "\"probe_p999_us\": %.2f, \"probe_max_us\": %.1f, "
        "\"teardown_reference_us\": %.1f, \"free_call_us\": %.1f, "
        "\"stalled\": %s}\n",
        static_cast<unsigned long long>(o.size_mib),
        static_cast<unsigned long long>(o.rounds), ops, p50, p99, p999,
        max_us, ref_us, free_us, stalled ? "true" : "false");
  } else {
    std::printf(
        "%llu MiB region freed %llu times beside %zu 8-byte WRITEs\n"
        "  prober: p50 %.2f us, p99 %.2f us, p99.9 %.2f us, max %.1f us\n"
        "  reference: the teardown itself %.1f us; the freer's FreeRegion %.1f "
        "us\n  %s\n",
        static_cast<unsigned long long>(o.size_mib),
        static_cast<unsigned long long>(o.rounds), ops, p50, p99, p999,
        max_us, ref_us, free_us,
        stalled ? "STALLED: the prober waited for a teardown"
                : "no stall: the prober's max is below half the teardown");
  }
  return stalled ? 1 : 0;
}
