#include "client/rdmactl/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/rdmactl/format.h"
#include "client/rdmactl/json.h"

namespace rdmad::rdmactl {
namespace {

double Microseconds(int64_t ns) { return static_cast<double>(ns) / 1e3; }

std::string Bound(const BenchReport& report) {
  if (report.iterations.has_value()) {
    return absl::StrCat(*report.iterations, " ops per size");
  }
  return absl::StrCat(absl::FormatDuration(report.duration), " per size");
}

}  // namespace

int64_t Percentile(absl::Span<const int64_t> sorted, double percent) {
  if (sorted.empty()) return 0;
  const size_t n = sorted.size();
  if (!(percent > 0)) return sorted.front();
  if (percent >= 100) return sorted.back();
  // Rank (1-based) = ceil(percent/100 * n); the small slack keeps e.g.
  // 99.9% of 1000 at rank 999 despite floating-point rounding.
  const double exact = percent / 100.0 * static_cast<double>(n);
  size_t rank = static_cast<size_t>(std::ceil(exact - 1e-9));
  rank = std::clamp<size_t>(rank, 1, n);
  return sorted[rank - 1];
}

double PerSecond(double count, absl::Duration elapsed) {
  if (elapsed <= absl::ZeroDuration()) return 0;
  return count / absl::ToDoubleSeconds(elapsed);
}

BenchResult Summarize(uint64_t size, std::vector<int64_t> latencies_ns,
                      absl::Duration elapsed, std::string transport) {
  const uint64_t ops = latencies_ns.size();
  return Summarize(size, ops, std::move(latencies_ns), elapsed,
                   std::move(transport));
}

BenchResult Summarize(uint64_t size, uint64_t ops,
                      std::vector<int64_t> latencies_ns,
                      absl::Duration elapsed, std::string transport) {
  std::sort(latencies_ns.begin(), latencies_ns.end());
  BenchResult r;
  r.size = size;
  r.ops = ops;
  r.bytes = size * r.ops;
  r.elapsed = elapsed;
  r.bytes_per_s = PerSecond(static_cast<double>(r.bytes), elapsed);
  r.mb_per_s = r.bytes_per_s / 1e6;
  r.gbit_per_s = r.bytes_per_s * 8 / 1e9;
  r.ops_per_s = PerSecond(static_cast<double>(r.ops), elapsed);
  r.p50_us = Microseconds(Percentile(latencies_ns, 50));
  r.p99_us = Microseconds(Percentile(latencies_ns, 99));
  r.p999_us = Microseconds(Percentile(latencies_ns, 99.9));
  r.transport = std::move(transport);
  return r;
}

void SetDaemonLatency(BenchResult& result, std::vector<int64_t> latencies_ns) {
  if (latencies_ns.empty()) return;
  std::sort(latencies_ns.begin(), latencies_ns.end());
  result.daemon_p50_us = Microseconds(Percentile(latencies_ns, 50));
  result.daemon_p99_us = Microseconds(Percentile(latencies_ns, 99));
}

std::string RenderBenchTable(const BenchReport& report) {
  std::string out = absl::StrCat(
      report.op, report.op == "read" ? " from " : " to ", report.peer, "/",
      report.region, ", qd ", report.queue_depth,
      report.batch > 1 ? absl::StrCat(", batch ", report.batch) : "",
      report.window > 1 ? absl::StrCat(", window ", report.window) : "", ", ",
      Bound(report), "\n");
  Table table({"SIZE", "OPS", "MB/s", "Gb/s", "OPS/s", "P50(us)", "P99(us)",
               "P99.9(us)", "DAEMON P50(us)", "TRANSPORT"});
  for (size_t column = 0; column < 9; ++column) table.AlignRight(column);
  for (const BenchResult& r : report.results) {
    table.AddRow({HumanSize(r.size), absl::StrCat(r.ops),
                  absl::StrFormat("%.2f", r.mb_per_s),
                  absl::StrFormat("%.3f", r.gbit_per_s),
                  absl::StrFormat("%.0f", r.ops_per_s),
                  absl::StrFormat("%.1f", r.p50_us),
                  absl::StrFormat("%.1f", r.p99_us),
                  absl::StrFormat("%.1f", r.p999_us),
                  r.daemon_p50_us.has_value()
                      ? absl::StrFormat("%.1f", *r.daemon_p50_us)
                      : std::string("-"),
                  r.transport});
  }
  absl::StrAppend(&out, table.Render());
  return out;
}

std::string BenchReportJson(const BenchReport& report) {
  Json results = Json::Array();
  for (const BenchResult& r : report.results) {
    results.Push(Json::Object()
                     .Set("size", r.size)
                     .Set("ops", r.ops)
                     .Set("bytes", r.bytes)
                     .Set("seconds", absl::ToDoubleSeconds(r.elapsed))
                     .Set("bytes_per_s", r.bytes_per_s)
                     .Set("mb_per_s", r.mb_per_s)
                     .Set("gbit_per_s", r.gbit_per_s)
                     .Set("ops_per_s", r.ops_per_s)
                     .Set("p50_us", r.p50_us)
                     .Set("p99_us", r.p99_us)
                     .Set("p999_us", r.p999_us)
                     .Set("daemon_p50_us", r.daemon_p50_us)
                     .Set("daemon_p99_us", r.daemon_p99_us)
                     .Set("transport", r.transport));
  }
  Json json = Json::Object();
  json.Set("op", report.op)
      .Set("peer", report.peer)
      .Set("region", report.region)
      .Set("qd", report.queue_depth)
      .Set("batch", report.batch)
      .Set("window", report.window)
      .Set("spin_us", report.spin.has_value()
                          ? Json(absl::ToDoubleMicroseconds(*report.spin))
                          : Json())
      .Set("spin_when_preempted", report.spin_when_preempted)
      .Set("iterations", report.iterations)
      .Set("duration_s", report.iterations.has_value()
                             ? Json()
                             : Json(absl::ToDoubleSeconds(report.duration)))
      .Set("results", std::move(results));
  return json.Dump();
}

}  // namespace rdmad::rdmactl
