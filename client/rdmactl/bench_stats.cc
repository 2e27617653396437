#include "client/rdmactl/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/rdmactl/format.h"

namespace rdmad::rdmactl {
namespace {

double Microseconds(int64_t ns) { return static_cast<double>(ns) / 1e3; }

// A JSON string literal. Names and addresses are validated ASCII, but the
// escaping does not rely on it.
std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += "\"";
  return out;
}

// A finite number with `decimals` decimals.
std::string JsonNumber(double value, int decimals = 3) {
  if (!std::isfinite(value)) return "0";
  return absl::StrFormat("%.*f", decimals, value);
}

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
}

std::string RenderBenchTable(const BenchReport& report) {
  std::string out = absl::StrCat(
      report.op, report.op == "read" ? " from " : " to ", report.peer, "/",
      report.region, ", qd ", report.queue_depth,
      report.batch > 1 ? absl::StrCat(", batch ", report.batch) : "", ", ",
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
  std::string out = absl::StrCat(
      "{\n  \"op\": ", JsonString(report.op),
      ",\n  \"peer\": ", JsonString(report.peer),
      ",\n  \"region\": ", JsonString(report.region),
      ",\n  \"qd\": ", report.queue_depth, ",\n  \"batch\": ", report.batch,
      ",\n  \"iterations\": ",
      report.iterations.has_value() ? absl::StrCat(*report.iterations)
                                    : std::string("null"),
      ",\n  \"duration_s\": ",
      report.iterations.has_value()
          ? std::string("null")
          : JsonNumber(absl::ToDoubleSeconds(report.duration)),
      ",\n  \"results\": [");
  for (size_t i = 0; i < report.results.size(); ++i) {
    const BenchResult& r = report.results[i];
    absl::StrAppend(
        &out, i == 0 ? "\n" : ",\n", "    {\"size\": ", r.size,
        ", \"ops\": ", r.ops, ", \"bytes\": ", r.bytes,
        ", \"seconds\": ", JsonNumber(absl::ToDoubleSeconds(r.elapsed), 6),
        ",\n     \"bytes_per_s\": ", JsonNumber(r.bytes_per_s),
        ", \"mb_per_s\": ", JsonNumber(r.mb_per_s, 6),
        ", \"gbit_per_s\": ", JsonNumber(r.gbit_per_s, 6),
        ", \"ops_per_s\": ", JsonNumber(r.ops_per_s),
        ",\n     \"p50_us\": ", JsonNumber(r.p50_us),
        ", \"p99_us\": ", JsonNumber(r.p99_us),
        ", \"p999_us\": ", JsonNumber(r.p999_us),
        ", \"daemon_p50_us\": ",
        r.daemon_p50_us.has_value() ? JsonNumber(*r.daemon_p50_us)
                                    : std::string("null"),
        ", \"transport\": ", JsonString(r.transport), "}");
  }
  absl::StrAppend(&out, report.results.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return out;
}

}  // namespace rdmad::rdmactl
