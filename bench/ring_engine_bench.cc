// rdmad_ring_engine_bench: the daemon's CPU per ring operation, without the
// scheduler in the way.
//
// On a shared 2-core machine the latency of a ping-pong between two
// processes depends mostly on who else runs; this measures the code
// instead. One thread plays both sides in turn, with the daemon's real
// parts: a RegionTable with a session buffer and an exported region, the
// TransferEngine (with the daemon's Prometheus metrics as its observer),
// a RingQueue and the RingEngine's Poll. Per round it pushes --batch 8-byte
// WRITEs on the submission ring as the client library does, runs one
// engine Poll (take, copy, validate, check, copy the bytes, complete), and
// reaps the completions. Prints the wall time per operation of the best of
// --runs runs (the client's two ring ends included: a few ns per op).
//
// What it leaves out: cache lines moving between cores (the real client
// and engine run on two), the loop's turn, and waking up.
//
//   rdmad_ring_engine_bench [--batch N] [--ops N] [--runs N]
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/queue_ring.h"
#include "common/tool_flags.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/core/region_table.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/ring/remote_handles.h"
#include "daemon/ring/ring_engine.h"
#include "daemon/ring/ring_queue.h"
#include "daemon/runtime/event_loop.h"

namespace rdmad {
namespace {

struct Options {
  long batch = 16;
  long ops = 2000000;
  long runs = 5;
};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "rdmad_ring_engine_bench: %s\n", what.c_str());
  std::exit(1);
}

Options Parse(int argc, char** argv) {
  Options o;
  ToolFlags("rdmad_ring_engine_bench", "[--batch N] [--ops N] [--runs N]")
      .Number("--batch", &o.batch, 1L,
              static_cast<long>(ring::RingEngine::kRoundBudget))
      .Number("--ops", &o.ops, 1L)
      .Number("--runs", &o.runs, 1L)
      .Parse(argc, argv);
  return o;
}

int Main(const Options& o) {
#ifdef NDEBUG
  // As rdmad does in release builds (daemon/main.cc).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
  const core::Caller alice{1, 1000, 1000, 11, {}};
  core::NullRegistrar registrar;
  core::RegionTable regions(&registrar, core::RegionLimits{});
  core::AllocateOptions buffer;  // the client's buffer (a session's)
  buffer.size = 4096;
  auto local = regions.Allocate(alice, buffer);
  core::AllocateOptions target;  // `rdmactl alloc small-ops 4K --export rw`
  target.name = "small-ops";
  target.size = 4096;
  target.daemon_owned = true;
  target.export_access = core::RemoteAccess::kReadWrite;
  if (!local.ok() || !regions.Allocate(alice, target).ok()) {
    Fail("cannot allocate the regions");
  }
  core::TransferEngine transfers(&regions, nullptr);
  metrics::DaemonMetrics metrics{metrics::MetricSources{}};
  transfers.SetObserver(&metrics);

  auto handles = std::make_shared<ring::RemoteHandles>();
  ring::RemoteHandle handle;
  handle.target.name = "small-ops";
  handle.size = 4096;
  handle.access = core::RemoteAccess::kReadWrite;
  handle.transport = core::TransportKind::kLocal;
  auto added = handles->Add(handle);
  if (!added.ok()) Fail(std::string(added.status().message()));
  const uint64_t handle_id = (*added)->id;

  ring::RingQueueOptions queue_options;
  queue_options.submission_entries = 256;
  queue_options.completion_entries = 512;
  auto queue = ring::RingQueue::Create(1, alice, handles, queue_options);
  if (!queue.ok()) Fail(std::string(queue.status().message()));

  // The engine's loop is never started: Stop() runs the queued Attach on
  // this thread (event_loop.h), and from then on this thread is the loop.
  auto loop = runtime::EventLoop::Create("bench");
  if (!loop.ok()) Fail(std::string(loop.status().message()));
  ring::RingEngine engine(loop->get(), &transfers);
  engine.Attach(*queue);
  (*loop)->Stop();

  // The client's own mapping of the queue's memfd, as the library maps it.
  void* client = ::mmap(nullptr, (*queue)->segment_size(),
                        PROT_READ | PROT_WRITE, MAP_SHARED,
                        (*queue)->segment_fd(), 0);
  if (client == MAP_FAILED) Fail("cannot map the queue");
  queue::SubmissionProducer producer(client);
  queue::CompletionConsumer consumer(client);

  queue::SubmissionEntry entry{};
  entry.op = static_cast<uint8_t>(queue::OpCode::kWrite);
  entry.local_region = (*local)->id();
  entry.remote_handle = handle_id;
  entry.length = 8;
  std::vector<queue::CompletionEntry> done(o.batch);

  double best_ns = 0;
  for (long run = 0; run < o.runs; ++run) {
    const long rounds = o.ops / o.batch;
    const auto start = std::chrono::steady_clock::now();
    for (long r = 0; r < rounds; ++r) {
      for (long i = 0; i < o.batch; ++i) {
        entry.tag = static_cast<uint64_t>(i);
        producer.Push(entry);
      }
      producer.Publish();
      if (!engine.Poll()) Fail("the engine found no work");
      const size_t n = consumer.Poll(absl::MakeSpan(done));
      if (n != static_cast<size_t>(o.batch)) Fail("completions missing");
      for (size_t i = 0; i < n; ++i) {
        if (done[i].code != 0) Fail("an operation failed");
      }
    }
    const double ns =
        std::chrono::duration<double, std::nano>(
            std::chrono::steady_clock::now() - start)
            .count() /
        static_cast<double>(rounds * o.batch);
    if (run == 0 || ns < best_ns) best_ns = ns;
  }
  std::printf("ring_engine_bench batch=%ld ns_per_op=%.1f ops_per_s=%.0f\n",
              o.batch, best_ns, 1e9 / best_ns);
  engine.Shutdown();
  ::munmap(client, (*queue)->segment_size());
  return 0;
}

}  // namespace
}  // namespace rdmad

int main(int argc, char** argv) { return rdmad::Main(rdmad::Parse(argc, argv)); }
