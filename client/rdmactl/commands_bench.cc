// rdmactl bench: one-sided transfer bandwidth and latency to a region that
// another daemon (or, without --peer, this daemon through its own peer
// address) exports.
//
// Per size: one warm-up transfer, then `queue_depth` threads, each doing
// one transfer (or, with --batch, one batch; with --window, that many
// batches) at a time, until --iters
// operations were claimed or --duration passed: with --path ring on a
// shared-memory queue of the thread's own (submit, then wait for the
// completions), with --path grpc as Local gRPC calls (Write/Read, or
// Batch, through the client library's internal RPC path: client/rpc_path.h).
// Each operation's latency is the time its call took;
// throughput is bytes over the wall time from the common start to the last
// completion. All operations share one local buffer and the remote range
// at offset 0: bench measures the path, not the data.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <latch>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/rdmactl/bench_stats.h"
#include "client/rdmactl/bench_window.h"
#include "client/rdmactl/commands.h"
#include "client/rdmactl/format.h"
#include "client/rdmactl/progress.h"
#include "client/rpc_path.h"
#include "common/size.h"

namespace rdmad::rdmactl {
namespace {

using Clock = std::chrono::steady_clock;

absl::string_view OpName(BenchOp op) {
  return op == BenchOp::kWrite ? "write" : "read";
}

uint64_t Largest(const std::vector<uint64_t>& sizes) {
  return *std::max_element(sizes.begin(), sizes.end());
}

// A region bench created on this daemon: freed when done, also when the
// run fails (then quietly; Free() reports errors).
class ScratchRegion {
 public:
  ScratchRegion(Client& client, std::string name)
      : client_(&client), name_(std::move(name)) {}
  ScratchRegion(const ScratchRegion&) = delete;
  ScratchRegion& operator=(const ScratchRegion&) = delete;
  ~ScratchRegion() {
    if (armed_) client_->FreeRegion(name_).IgnoreError();
  }

  absl::Status Free() {
    armed_ = false;
    absl::Status status = client_->FreeRegion(name_);
    return status.ok()
               ? status
               : Failed(absl::StrCat("free scratch region ", name_), status);
  }

 private:
  Client* client_;  // Not owned.
  std::string name_;
  bool armed_ = true;
};

// Adds what to do about the usual failures of a bench transfer. The region
// is this daemon's unless --peer named another: then a refusal is its
// mode's (bench checked its export first, and --local needs none), which
// its owner changes, not the peer's export.
absl::Status WithHint(const absl::Status& status, const BenchOptions& options,
                      absl::string_view peer) {
  const bool region_is_here = options.peer.empty();
  std::string hint;
  const std::string alloc =
      absl::StrCat("'rdmactl alloc ", options.region, " ",
                   FormatSize(Largest(options.sizes)), " --export rw'");
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      hint = region_is_here
                 ? absl::StrCat("on this node: pass --create-region, or ",
                                alloc)
                 : absl::StrCat("on the node of ", peer, ": ", alloc);
      break;
    case absl::StatusCode::kOutOfRange:
      hint =
          absl::StrCat("the region must hold the largest size (",
                       HumanSize(Largest(options.sizes)),
                       "): pass smaller --sizes or recreate it with ", alloc);
      break;
    case absl::StatusCode::kPermissionDenied:
      hint = region_is_here
                 ? absl::StrCat("ask the owner of region '", options.region,
                                "' to grant you access with 'rdmactl chmod' "
                                "or 'rdmactl chgrp', or bench a region of "
                                "your own: --region NAME --create-region")
                 : absl::StrCat("on the node of ", peer,
                                " run 'rdmactl export ", options.region,
                                " rw'");
      break;
    default:
      return status;
  }
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), " (", hint, ")"));
}

// Checks (and with --create-region creates) the region on this daemon, for
// a run without --peer. Returns the region bench created, if any.
absl::StatusOr<std::unique_ptr<ScratchRegion>> PrepareLocalRegion(
    Client& client, const BenchOptions& options) {
  const uint64_t largest = Largest(options.sizes);
  auto regions = client.ListRegions();
  if (!regions.ok()) return Failed("list regions", regions.status());
  const RegionInfo* found = nullptr;
  for (const RegionInfo& region : *regions) {
    if (region.name == options.region) found = &region;
  }
  const std::string what = absl::StrCat("bench region ", options.region);
  if (found == nullptr) {
    if (!options.create_region) {
      return Failed(what, absl::NotFoundError(absl::StrCat(
                              "region '", options.region,
                              "' does not exist on this daemon: pass "
                              "--create-region, or create it with "
                              "'rdmactl alloc ",
                              options.region, " ", FormatSize(largest),
                              " --export rw'")));
    }
    auto created =
        client.CreateRegion(options.region, largest, Access::kReadWrite);
    if (!created.ok()) {
      return Failed(absl::StrCat("create region ", options.region, " (",
                                 HumanSize(largest), ")"),
                    created.status());
    }
    return std::make_unique<ScratchRegion>(client, options.region);
  }
  if (found->size < largest) {
    return Failed(
        what,
        absl::OutOfRangeError(absl::StrCat(
            "region '", options.region, "' has ", HumanSize(found->size),
            ", less than the largest size (", HumanSize(largest),
            "): pass smaller --sizes, or free it ('rdmactl "
            "free ",
            options.region,
            "') and let --create-region "
            "make one")));
  }
  // A copy inside this daemon (--local) needs no export, as rdmactl copy
  // between local regions needs none; the loop back through the daemon's
  // own peer address does.
  if (options.local) return nullptr;
  const bool exported =
      options.op == BenchOp::kWrite
          ? found->export_access == Access::kWrite ||
                found->export_access == Access::kReadWrite
          : found->export_access == Access::kRead ||
                found->export_access == Access::kReadWrite;
  if (!exported) {
    return Failed(what, absl::PermissionDeniedError(absl::StrCat(
                            "region '", options.region,
                            "' is not exported for ", OpName(options.op),
                            ": run 'rdmactl export ", options.region, " rw'")));
  }
  return nullptr;
}

// What one thread measured.
struct WorkerResult {
  uint64_t ops = 0;
  std::vector<int64_t> latencies_ns;  // one per call (a batch is one call)
  std::vector<int64_t> daemon_latencies_ns;  // post to completion in rdmad
  Clock::time_point last_end;
  std::set<Transport> transports;
  std::optional<Transport> last_transport;  // the last one inserted
};

// State shared by the threads of one size.
struct SizeRun {
  Client* client;  // Not owned.
  const Buffer* local;
  const RemoteRegion* remote;
  BenchPath path = BenchPath::kRing;
  const RemoteHandle* handle = nullptr;  // the ring path's
  BenchOp op;
  uint64_t size;
  int batch = 1;  // operations per call
  int window = 1;  // batches in flight per thread (ring path)
  absl::Duration spin;  // QueueOptions::spin
  bool spin_when_preempted = false;  // QueueOptions::spin_when_preempted
  std::optional<uint64_t> iterations;
  Clock::time_point start;     // written before `go`
  Clock::time_point deadline;  // duration runs
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> claimed{0};
  std::atomic<uint64_t> completed{0};
  std::atomic<int> finished{0};
  std::mutex mu;
  absl::Status error;  // the first failure, guarded by mu
  uint64_t error_op = 0;
};

Op::Kind KindOf(BenchOp op) {
  return op == BenchOp::kWrite ? Op::Kind::kWrite : Op::Kind::kRead;
}

// One operation of `size` bytes at offset 0: as a Local gRPC call
// (--path grpc), else on the client's own queue (Client::Write/Read).
absl::StatusOr<Completion> Transfer(Client& client, BenchPath path, BenchOp op,
                                    const Buffer& local,
                                    const RemoteRegion& remote, uint64_t size) {
  if (path == BenchPath::kRing) {
    return op == BenchOp::kWrite ? client.Write(local, 0, remote, 0, size)
                                 : client.Read(local, 0, remote, 0, size);
  }
  const Op one{
      .kind = KindOf(op), .local = &local, .remote = &remote, .length = size};
  auto done =
      client_internal::RpcPath::Run(client, absl::MakeConstSpan(&one, 1));
  if (!done.ok()) return done.status();
  if (!(*done)[0].status.ok()) return (*done)[0].status;
  return (*done)[0];
}

// `count` operations in one Local Batch call; the first failed one's
// status.
absl::Status TransferBatch(SizeRun& run, uint64_t count) {
  const std::vector<Op> ops(count, Op{.kind = KindOf(run.op),
                                      .local = run.local,
                                      .remote = run.remote,
                                      .length = run.size});
  auto results = client_internal::RpcPath::Run(*run.client, ops);
  if (!results.ok()) return results.status();
  for (const Completion& done : *results) {
    if (!done.status.ok()) return done.status;
  }
  return absl::OkStatus();
}

// The ring path's operations, built once per worker: the timed section
// holds the library's work, not the benchmark's allocations.
std::vector<Op> RingOps(const SizeRun& run) {
  std::vector<Op> ops(std::max(run.batch, 1));
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].kind = KindOf(run.op);
    ops[i].local = run.local;
    ops[i].remote = run.handle;
    ops[i].length = run.size;
    ops[i].tag = i;
  }
  return ops;
}

// How many operations the next call (or batch) does: `run.batch`, fewer
// for the last of --iters; none once the run is over (another thread
// failed, --iters were all claimed, or --duration passed).
std::optional<uint64_t> ClaimBatch(SizeRun& run) {
  if (run.stop.load(std::memory_order_relaxed)) return std::nullopt;
  uint64_t count = run.batch;
  if (run.iterations.has_value()) {
    const uint64_t index = run.claimed.fetch_add(run.batch);
    if (index >= *run.iterations) return std::nullopt;
    count = std::min<uint64_t>(count, *run.iterations - index);
  } else if (Clock::now() >= run.deadline) {
    return std::nullopt;
  }
  return count;
}

// Notes which transport carried `done` (a set look-up per operation would
// be the loop's dearest step).
void NoteTransport(const Completion& done, WorkerResult& out) {
  if (done.transport != out.last_transport) {
    out.last_transport = done.transport;
    out.transports.insert(done.transport);
  }
}

// The ring path: the first `count` of `ops` submitted on `queue` at once,
// then waited for.
absl::Status RingCall(Queue& queue, absl::Span<const Op> ops, uint64_t count,
                      std::vector<Completion>& done, WorkerResult& out) {
  size_t submitted = 0;
  size_t completed = 0;
  while (completed < count) {
    if (submitted < count) {
      auto queued = queue.Submit(ops.subspan(submitted, count - submitted));
      if (!queued.ok() && !absl::IsResourceExhausted(queued.status())) {
        return queued.status();
      }
      if (queued.ok()) submitted += *queued;
    }
    size_t got = queue.Poll(absl::MakeSpan(done));
    if (got == 0) {
      // A bound on a lost completion, not on the run (a timeout, not a
      // deadline: no clock reading per operation).
      if (absl::Status s = queue.Wait(absl::Seconds(60)); !s.ok()) return s;
      got = queue.Poll(absl::MakeSpan(done));
    }
    for (size_t i = 0; i < got; ++i) {
      if (!done[i].status.ok()) return done[i].status;
      if (count == 1) {
        out.daemon_latencies_ns.push_back(
            absl::ToInt64Nanoseconds(done[i].daemon_time));
      }
      NoteTransport(done[i], out);
    }
    completed += got;
  }
  return absl::OkStatus();
}

// The ring path with --window K: K batches in flight on `queue`, each
// submitted again as soon as its last completion is back, until no batch
// is left to start (--iters claimed, --duration passed, or another thread
// failed) and the last one is back. A batch's latency runs from its
// submission to its last completion. Each operation's tag names its batch.
absl::Status RingWindow(SizeRun& run, Queue& queue,
                        std::vector<Completion>& done, WorkerResult& out) {
  BenchWindow window(run.window, std::max(run.batch, 1));
  struct Slot {
    std::vector<Op> ops;     // tagged by `window`
    uint64_t count = 0;      // operations of this batch; 0: none in flight
    uint64_t submitted = 0;  // of them, on the ring
    Clock::time_point start;
  };
  std::vector<Slot> slots(window.slots());
  for (size_t s = 0; s < slots.size(); ++s) {
    slots[s].ops = RingOps(run);
    for (size_t i = 0; i < slots[s].ops.size(); ++i) {
      slots[s].ops[i].tag = window.Tag(s, i);
    }
  }
  // The next batch for slot `s`; false when none is left to start.
  auto claim = [&run, &window, &slots](size_t s) {
    const std::optional<uint64_t> count = ClaimBatch(run);
    Slot& slot = slots[s];
    slot.count = count.value_or(0);
    slot.submitted = 0;
    slot.start = Clock::now();
    if (count.has_value()) window.Start(s, *count);
    return count.has_value();
  };
  size_t active = 0;
  for (size_t s = 0; s < slots.size(); ++s) {
    if (!claim(s)) break;
    ++active;
  }
  while (active > 0) {
    // The queue holds every batch in flight, so Submit takes each whole;
    // what it did not take goes on the next round.
    for (Slot& slot : slots) {
      if (slot.submitted == slot.count) continue;
      auto queued = queue.Submit(absl::MakeConstSpan(slot.ops).subspan(
          slot.submitted, slot.count - slot.submitted));
      if (queued.ok()) {
        slot.submitted += *queued;
      } else if (!absl::IsResourceExhausted(queued.status())) {
        return queued.status();
      }
    }
    size_t got = queue.Poll(absl::MakeSpan(done));
    if (got == 0) {
      // A bound on a lost completion, not on the run.
      if (absl::Status s = queue.Wait(absl::Seconds(60)); !s.ok()) return s;
      got = queue.Poll(absl::MakeSpan(done));
    }
    for (size_t i = 0; i < got; ++i) {
      const Completion& c = done[i];
      if (!c.status.ok()) return c.status;
      const absl::StatusOr<BenchWindow::Completed> completed =
          window.Complete(c.tag);
      if (!completed.ok()) return completed.status();
      if (window.batch() == 1) {
        out.daemon_latencies_ns.push_back(
            absl::ToInt64Nanoseconds(c.daemon_time));
      }
      NoteTransport(c, out);
      if (!completed->batch_done) continue;
      Slot& slot = slots[completed->slot];
      const Clock::time_point now = Clock::now();
      out.latencies_ns.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(now - slot.start)
              .count());
      out.last_end = now;
      out.ops += slot.count;
      run.completed.fetch_add(slot.count, std::memory_order_relaxed);
      if (!claim(completed->slot)) --active;
    }
  }
  return absl::OkStatus();
}

// Records the first failure of any thread and stops the others.
void Fail(SizeRun& run, absl::Status status) {
  std::lock_guard<std::mutex> lock(run.mu);
  if (run.error.ok()) {
    run.error = std::move(status);
    run.error_op = run.completed.load() + 1;
  }
  run.stop = true;
}

void Worker(SizeRun& run, std::latch& ready, WorkerResult& out) {
  std::unique_ptr<Queue> queue;
  std::vector<Completion> done;
  const std::vector<Op> ops = RingOps(run);
  absl::Status setup;
  if (run.path == BenchPath::kRing) {
    // Room for every operation in flight: Submit then takes a whole batch.
    const int depth = std::max(run.batch * run.window, 8);
    auto opened = run.client->OpenQueue(
        {.depth = static_cast<uint32_t>(depth),
         .completion_depth = static_cast<uint32_t>(2 * depth),
         .spin = run.spin,
         .spin_when_preempted = run.spin_when_preempted});
    if (opened.ok()) {
      queue = *std::move(opened);
      done.resize(2 * depth);
    } else {
      setup = opened.status();
    }
  }
  ready.count_down();
  run.go.wait(false);
  out.last_end = run.start;
  if (!run.iterations.has_value()) {
    out.latencies_ns.reserve(4096);
    out.daemon_latencies_ns.reserve(4096);
  }
  if (!setup.ok()) {
    std::lock_guard<std::mutex> lock(run.mu);
    if (run.error.ok()) run.error = setup;
    run.stop = true;
  }
  if (queue != nullptr && run.window > 1) {
    if (absl::Status s = RingWindow(run, *queue, done, out); !s.ok()) {
      Fail(run, std::move(s));
    }
    run.finished.fetch_add(1);
    return;
  }
  for (;;) {
    const std::optional<uint64_t> claimed = ClaimBatch(run);
    if (!claimed.has_value()) break;
    const uint64_t count = *claimed;
    const Clock::time_point t0 = Clock::now();
    absl::Status status;
    std::optional<Completion> single;  // what a one-operation call says
    if (queue != nullptr) {
      status = RingCall(*queue, ops, count, done, out);
    } else if (run.batch > 1) {
      status = TransferBatch(run, count);
    } else if (auto result = Transfer(*run.client, run.path, run.op, *run.local,
                                      *run.remote, run.size);
               result.ok()) {
      single = *std::move(result);
    } else {
      status = result.status();
    }
    const Clock::time_point t1 = Clock::now();
    if (!status.ok()) {
      Fail(run, std::move(status));
      break;
    }
    // One sample per call: a whole batch's latency with --batch.
    out.latencies_ns.push_back(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    if (single.has_value()) {
      out.daemon_latencies_ns.push_back(
          absl::ToInt64Nanoseconds(single->daemon_time));
      out.transports.insert(single->transport);
    }
    out.last_end = t1;
    run.completed.fetch_add(count, std::memory_order_relaxed);
    out.ops += count;
  }
  run.finished.fetch_add(1);
}

std::string ProgressText(const SizeRun& run, absl::string_view label,
                         Clock::time_point now) {
  const double seconds = std::chrono::duration<double>(now - run.start).count();
  const uint64_t done = run.completed.load(std::memory_order_relaxed);
  const double mb_per_s =
      seconds > 0 ? static_cast<double>(done * run.size) / seconds / 1e6 : 0;
  return absl::StrFormat("%s: %.1fs, %d ops, %.2f MB/s", label, seconds, done,
                         mb_per_s);
}

absl::StatusOr<BenchResult> RunSize(Client& client, const Buffer& local,
                                    const RemoteRegion& remote,
                                    std::optional<RemoteHandle>& handle,
                                    const BenchOptions& options, uint64_t size,
                                    absl::string_view label,
                                    ProgressLine& progress) {
  const std::string what =
      absl::StrCat("bench ", OpName(options.op), " ", HumanSize(size),
                   options.op == BenchOp::kWrite ? " to " : " from ",
                   remote.peer, "/", remote.name);
  progress.Show(absl::StrCat(label, ": warming up"));
  // Not counted: sets up the connection to the peer on the first size.
  auto warm = Transfer(client, options.path, options.op, local, remote, size);
  if (!warm.ok()) {
    return Failed(absl::StrCat(what, " (warm-up)"),
                  WithHint(warm.status(), options, remote.peer));
  }
  if (options.path == BenchPath::kRing && !handle.has_value()) {
    auto opened = client.OpenRemote(remote);
    if (!opened.ok()) {
      return Failed(absl::StrCat(what, " (open)"),
                    WithHint(opened.status(), options, remote.peer));
    }
    handle = *std::move(opened);
  }

  SizeRun run;
  run.client = &client;
  run.local = &local;
  run.remote = &remote;
  run.path = options.path;
  run.handle = handle.has_value() ? &*handle : nullptr;
  run.op = options.op;
  run.size = size;
  run.iterations = options.iterations;
  run.batch = options.batch;
  run.window = options.window;
  run.spin = options.spin;
  run.spin_when_preempted = options.spin_when_preempted;
  const int threads = options.queue_depth;
  std::vector<WorkerResult> results(threads);
  std::latch ready(threads);
  std::vector<std::thread> workers;
  workers.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back(Worker, std::ref(run), std::ref(ready),
                         std::ref(results[i]));
  }
  ready.wait();
  run.start = Clock::now();
  run.deadline = run.start + absl::ToChronoNanoseconds(options.duration);
  run.go = true;
  run.go.notify_all();
  if (progress.enabled()) {
    while (run.finished.load() < threads) {
      progress.Show(ProgressText(run, label, Clock::now()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  for (std::thread& worker : workers) worker.join();

  if (!run.error.ok()) {
    return Failed(absl::StrCat(what, " (operation ", run.error_op, ")"),
                  WithHint(run.error, options, remote.peer));
  }
  std::vector<int64_t> latencies, daemon_latencies;
  uint64_t ops = 0;
  Clock::time_point end = run.start;
  std::set<Transport> transports;
  for (WorkerResult& r : results) {
    latencies.insert(latencies.end(), r.latencies_ns.begin(),
                     r.latencies_ns.end());
    daemon_latencies.insert(daemon_latencies.end(),
                            r.daemon_latencies_ns.begin(),
                            r.daemon_latencies_ns.end());
    end = std::max(end, r.last_end);
    ops += r.ops;
    transports.insert(r.transports.begin(), r.transports.end());
  }
  std::vector<std::string> names;
  for (Transport kind : transports) {
    names.push_back(std::string(TransportName(kind)));
  }
  // Batch calls do not say which transport carried them: the warm-up does.
  if (names.empty()) names.push_back(std::string(TransportName(warm->transport)));
  BenchResult result =
      Summarize(size, ops, std::move(latencies),
                absl::FromChrono(end - run.start), absl::StrJoin(names, "+"));
  SetDaemonLatency(result, std::move(daemon_latencies));
  return result;
}

}  // namespace

absl::Status RunBench(CommandContext& context) {
  const BenchOptions& options = context.invocation().bench;
  auto client = context.client();
  if (!client.ok()) return client.status();

  // The target: --peer, this daemon's region (--local), or this daemon's
  // own peer address.
  std::string peer = options.peer;
  std::unique_ptr<ScratchRegion> scratch;
  if (options.local) {
    auto prepared = PrepareLocalRegion(**client, options);
    if (!prepared.ok()) return prepared.status();
    scratch = *std::move(prepared);
  } else if (peer.empty()) {
    auto status = (*client)->GetStatus();
    if (!status.ok()) return Failed("get status", status.status());
    if (status->peer_address.empty()) {
      return Failed("bench", absl::FailedPreconditionError(
                                 "this daemon reports no peer address to "
                                 "loop back to: pass --peer HOST:PORT"));
    }
    peer = status->peer_address;
    auto prepared = PrepareLocalRegion(**client, options);
    if (!prepared.ok()) return prepared.status();
    scratch = *std::move(prepared);
  }
  RemoteRegion remote;
  remote.peer = peer;
  remote.name = options.region;
  std::optional<RemoteHandle> handle;  // opened after the first warm-up

  const uint64_t largest = Largest(options.sizes);
  auto local = (*client)->Allocate(largest);
  if (!local.ok()) {
    return Failed(
        absl::StrCat("allocate a local buffer of ", HumanSize(largest)),
        local.status());
  }
  // Touch every page now, not during the first measurements.
  std::memset(local->data(), 0x5a, local->size());

  BenchReport report;
  report.op = std::string(OpName(options.op));
  report.peer = options.local ? "local" : peer;
  report.region = options.region;
  report.queue_depth = options.queue_depth;
  report.batch = options.batch;
  report.window = options.window;
  if (options.path == BenchPath::kRing) {
    report.spin = options.spin;
    report.spin_when_preempted = options.spin_when_preempted;
  }
  report.iterations = options.iterations;
  report.duration = options.duration;
  {
    ProgressLine progress(ProgressLine::StderrIsTerminal());
    for (size_t i = 0; i < options.sizes.size(); ++i) {
      const uint64_t size = options.sizes[i];
      const std::string label =
          absl::StrCat(report.op, " ", HumanSize(size), " [", i + 1, "/",
                       options.sizes.size(), "]");
      auto result = RunSize(**client, *local, remote, handle, options, size,
                            label, progress);
      if (!result.ok()) return result.status();
      report.results.push_back(*std::move(result));
    }
  }
  absl::Status printed =
      context.Print(context.global().json ? BenchReportJson(report)
                                          : RenderBenchTable(report));
  if (absl::Status s = local->Release(); !s.ok() && printed.ok()) {
    printed = Failed("free the local buffer", s);
  }
  if (scratch != nullptr) {
    if (absl::Status s = scratch->Free(); !s.ok() && printed.ok()) {
      printed = s;
    }
  }
  return printed;
}

}  // namespace rdmad::rdmactl
