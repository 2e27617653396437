// The arithmetic of `rdmactl bench`: latency percentiles, throughput, and
// the table and JSON that report them.
//
// Example:
//   std::vector<int64_t> latencies_ns = ...;  // one per operation
//   BenchResult r = Summarize(64 << 10, std::move(latencies_ns),
//                             absl::Seconds(2), "tcp");
//   // r.ops, r.mb_per_s, r.p99_us, ...
//
// All functions are pure and thread-compatible.
#ifndef RDMAD_CLIENT_RDMACTL_BENCH_STATS_H_
#define RDMAD_CLIENT_RDMACTL_BENCH_STATS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"

namespace rdmad::rdmactl {

// The nearest-rank percentile of `sorted` (ascending): the smallest sample
// that at least `percent` % of the samples are less than or equal to. 0 for
// no samples; `percent` <= 0 gives the smallest sample, >= 100 the largest.
int64_t Percentile(absl::Span<const int64_t> sorted, double percent);

// `count` per second over `elapsed`; 0 when `elapsed` is not positive.
double PerSecond(double count, absl::Duration elapsed);

// What bench measured for one transfer size.
struct BenchResult {
  uint64_t size = 0;       // bytes per operation
  uint64_t ops = 0;        // operations completed
  uint64_t bytes = 0;      // size * ops
  absl::Duration elapsed;  // wall time from the start to the last completion
  double bytes_per_s = 0;
  double mb_per_s = 0;    // 10^6 bytes per second
  double gbit_per_s = 0;  // 10^9 bits per second
  double ops_per_s = 0;
  double p50_us = 0;  // latency of one operation, microseconds
  double p99_us = 0;
  double p999_us = 0;
  // The part of p50 spent inside the local daemon, from posting the
  // transfer to its completion; the rest is the client's gRPC call.
  // Unknown for Batch calls, which report no per-operation timing.
  std::optional<double> daemon_p50_us;
  // Its p99: a tail that the daemon's part shares is spent between the
  // daemons, one it does not share between the client and its daemon.
  std::optional<double> daemon_p99_us;
  std::string transport;  // "tcp", "verbs"; "tcp+verbs" if both carried ops
};

// Summarizes one size from the latency of each operation (nanoseconds, in
// any order; sorted here) and the wall time they took together.
BenchResult Summarize(uint64_t size, std::vector<int64_t> latencies_ns,
                      absl::Duration elapsed, std::string transport);
// The same when one latency sample may cover several operations (a Batch
// call): `ops` operations of `size` bytes were done in all.
BenchResult Summarize(uint64_t size, uint64_t ops,
                      std::vector<int64_t> latencies_ns,
                      absl::Duration elapsed, std::string transport);

// Sets `result.daemon_p50_us` and `daemon_p99_us` from the daemon-side
// latency of each
// operation (nanoseconds, any order).
void SetDaemonLatency(BenchResult& result, std::vector<int64_t> latencies_ns);

// A whole run, as printed.
struct BenchReport {
  std::string op;      // "write" or "read"
  std::string peer;    // HOST:PORT of the daemon exporting the region
  std::string region;  // its name
  int queue_depth = 1;
  int batch = 1;  // operations per call
  int window = 1;  // batches in flight per thread
  // How long a thread busy-polls its queue before sleeping (ring path).
  std::optional<absl::Duration> spin;
  // Whether it spins also after being preempted (ring path).
  std::optional<bool> spin_when_preempted;
  std::optional<uint64_t> iterations;  // per size; else `duration`
  absl::Duration duration;
  std::vector<BenchResult> results;  // in the order run
};

// A line naming the run, then a table with a row per size:
//   SIZE  OPS  MB/s  Gb/s  OPS/s  P50(us)  P99(us)  P99.9(us)  TRANSPORT
std::string RenderBenchTable(const BenchReport& report);

// One JSON object ending in a newline:
//   {"op": "write", "peer": "...", "region": "...", "qd": 1, "batch": 1,
//    "window": 1,
//    "spin_us": 30 (null on the gRPC path), "spin_when_preempted": false
//    (null on the gRPC path), "iterations": null, "duration_s": 2,
//    "results": [{"size": 8, "ops": ..., "bytes": ..., "seconds": ...,
//                 "bytes_per_s": ..., "mb_per_s": ..., "gbit_per_s": ...,
//                 "ops_per_s": ..., "p50_us": ..., "p99_us": ...,
//                 "p999_us": ..., "transport": "tcp"}, ...]}
std::string BenchReportJson(const BenchReport& report);

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_BENCH_STATS_H_
