// `rdmactl bench` without a daemon: percentiles, throughput arithmetic,
// the table and JSON it prints, and its command line.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "client/rdmactl/args.h"
#include "client/rdmactl/bench_stats.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/json_reader.h"

namespace rdmad::rdmactl {
namespace {

using ::rdmad::testing::JsonValue;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// 1, 2, ..., n.
std::vector<int64_t> Ramp(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 1);
  return v;
}

TEST(BenchStatsTest, PercentileOfNothingIsZero) {
  EXPECT_EQ(Percentile({}, 50), 0);
  EXPECT_EQ(Percentile({}, 99.9), 0);
}

TEST(BenchStatsTest, PercentileOfOneSampleIsThatSample) {
  const std::vector<int64_t> one = {42};
  EXPECT_EQ(Percentile(one, 0), 42);
  EXPECT_EQ(Percentile(one, 50), 42);
  EXPECT_EQ(Percentile(one, 99.9), 42);
  EXPECT_EQ(Percentile(one, 100), 42);
}

TEST(BenchStatsTest, PercentileIsNearestRank) {
  const std::vector<int64_t> hundred = Ramp(100);
  EXPECT_EQ(Percentile(hundred, 50), 50);
  EXPECT_EQ(Percentile(hundred, 99), 99);
  EXPECT_EQ(Percentile(hundred, 99.9), 100);  // rank ceil(99.9) = 100
  EXPECT_EQ(Percentile(hundred, 1), 1);
  EXPECT_EQ(Percentile(hundred, 0.5), 1);
  EXPECT_EQ(Percentile(hundred, 0), 1);
  EXPECT_EQ(Percentile(hundred, 100), 100);
  EXPECT_EQ(Percentile(hundred, 150), 100);

  const std::vector<int64_t> thousand = Ramp(1000);
  EXPECT_EQ(Percentile(thousand, 50), 500);
  EXPECT_EQ(Percentile(thousand, 99), 990);
  // 99.9% of 1000 is 999 exactly, even though 99.9 is not exact in binary.
  EXPECT_EQ(Percentile(thousand, 99.9), 999);

  const std::vector<int64_t> ten = Ramp(10);
  EXPECT_EQ(Percentile(ten, 50), 5);
  EXPECT_EQ(Percentile(ten, 51), 6);
  EXPECT_EQ(Percentile(ten, 99), 10);
}

TEST(BenchStatsTest, PerSecond) {
  EXPECT_DOUBLE_EQ(PerSecond(1000, absl::Seconds(2)), 500);
  EXPECT_DOUBLE_EQ(PerSecond(3, absl::Milliseconds(500)), 6);
  EXPECT_EQ(PerSecond(1000, absl::ZeroDuration()), 0);
  EXPECT_EQ(PerSecond(1000, -absl::Seconds(1)), 0);
}

TEST(BenchStatsTest, SummarizeComputesRatesAndPercentiles) {
  // 1000 operations of 1 MB taking 1..1000 us each, in any order, within
  // 2 s of wall time.
  std::vector<int64_t> latencies;
  for (int64_t us : Ramp(1000)) latencies.push_back(us * 1000);
  std::shuffle(latencies.begin(), latencies.end(), std::mt19937(7));
  const BenchResult r = Summarize(1000000, latencies, absl::Seconds(2), "tcp");
  EXPECT_EQ(r.size, 1000000u);
  EXPECT_EQ(r.ops, 1000u);
  EXPECT_EQ(r.bytes, 1000000000u);
  EXPECT_EQ(r.elapsed, absl::Seconds(2));
  EXPECT_DOUBLE_EQ(r.bytes_per_s, 5e8);
  EXPECT_DOUBLE_EQ(r.mb_per_s, 500);
  EXPECT_DOUBLE_EQ(r.gbit_per_s, 4);
  EXPECT_DOUBLE_EQ(r.ops_per_s, 500);
  EXPECT_DOUBLE_EQ(r.p50_us, 500);
  EXPECT_DOUBLE_EQ(r.p99_us, 990);
  EXPECT_DOUBLE_EQ(r.p999_us, 999);
  EXPECT_EQ(r.transport, "tcp");
}

TEST(BenchStatsTest, SummarizeBatchesCountsOperationsNotCalls) {
  // 10 Batch calls of 16 operations of 64 KiB, each call 100..1000 us.
  std::vector<int64_t> calls;
  for (int64_t us = 100; us <= 1000; us += 100) calls.push_back(us * 1000);
  const BenchResult r =
      Summarize(65536, 160, calls, absl::Milliseconds(4), "verbs");
  EXPECT_EQ(r.ops, 160u);
  EXPECT_EQ(r.bytes, 160u * 65536);
  EXPECT_DOUBLE_EQ(r.ops_per_s, 40000);
  EXPECT_DOUBLE_EQ(r.p50_us, 500);  // of calls
  EXPECT_FALSE(r.daemon_p50_us.has_value());
}

TEST(BenchStatsTest, DaemonLatencyIsItsOwnMedian) {
  BenchResult r = Summarize(8, {5000, 1000, 3000}, absl::Seconds(1), "tcp");
  SetDaemonLatency(r, {});
  EXPECT_FALSE(r.daemon_p50_us.has_value());
  SetDaemonLatency(r, {900, 100, 500});
  ASSERT_TRUE(r.daemon_p50_us.has_value());
  EXPECT_DOUBLE_EQ(*r.daemon_p50_us, 0.5);
  // And its tail, to tell where a slow operation spent its time.
  std::vector<int64_t> daemon(100, 1000);
  daemon[7] = 4'000'000;
  daemon[42] = 3'000'000;
  SetDaemonLatency(r, daemon);
  ASSERT_TRUE(r.daemon_p99_us.has_value());
  EXPECT_DOUBLE_EQ(*r.daemon_p50_us, 1);
  EXPECT_GE(*r.daemon_p99_us, 3000);
}

TEST(BenchStatsTest, SummarizeBinarySizeInDecimalUnits) {
  // 4 KiB x 250000 in 1 s: 1.024e9 bytes/s = 1024 MB/s = 8.192 Gb/s.
  const BenchResult r = Summarize(4096, std::vector<int64_t>(250000, 1500),
                                  absl::Seconds(1), "verbs");
  EXPECT_DOUBLE_EQ(r.mb_per_s, 1024);
  EXPECT_DOUBLE_EQ(r.gbit_per_s, 8.192);
  EXPECT_DOUBLE_EQ(r.ops_per_s, 250000);
  EXPECT_DOUBLE_EQ(r.p50_us, 1.5);
  EXPECT_DOUBLE_EQ(r.p999_us, 1.5);
}

TEST(BenchStatsTest, SummarizeNothing) {
  const BenchResult r = Summarize(64, {}, absl::ZeroDuration(), "-");
  EXPECT_EQ(r.ops, 0u);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_EQ(r.bytes_per_s, 0);
  EXPECT_EQ(r.ops_per_s, 0);
  EXPECT_EQ(r.p50_us, 0);
  EXPECT_EQ(r.p999_us, 0);
}

BenchReport SampleReport() {
  BenchReport report;
  report.op = "write";
  report.peer = "127.0.0.1:7471";
  report.region = "rdmad-bench";
  report.queue_depth = 4;
  report.duration = absl::Seconds(2);
  report.spin = absl::Microseconds(30);
  report.spin_when_preempted = true;
  std::vector<int64_t> latencies;
  for (int64_t us : Ramp(1000)) latencies.push_back(us * 1000);
  report.results.push_back(Summarize(8, latencies, absl::Seconds(2), "tcp"));
  report.results.push_back(
      Summarize(1 << 20, latencies, absl::Seconds(2), "tcp"));
  return report;
}

TEST(BenchReportTest, TableHasARowPerSize) {
  const std::string text = RenderBenchTable(SampleReport());
  EXPECT_THAT(text, HasSubstr("write to 127.0.0.1:7471/rdmad-bench, qd 4, "
                              "2s per size\n"));
  EXPECT_THAT(text, HasSubstr("SIZE"));
  EXPECT_THAT(text, HasSubstr("MB/s"));
  EXPECT_THAT(text, HasSubstr("Gb/s"));
  EXPECT_THAT(text, HasSubstr("P99.9(us)"));
  EXPECT_THAT(text, HasSubstr("TRANSPORT"));
  // 1 MiB x 1000 in 2 s = 524.288 MB/s, 4.194 Gb/s, 500 ops/s.
  EXPECT_THAT(text, HasSubstr("1 MiB"));
  EXPECT_THAT(text, HasSubstr("524.29"));
  EXPECT_THAT(text, HasSubstr("4.194"));
  EXPECT_THAT(text, HasSubstr("500.0"));  // p50
  EXPECT_THAT(text, HasSubstr("999.0"));  // p99.9
  EXPECT_THAT(text, HasSubstr("tcp"));
  // Header line, column header, two rows.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4);
}

TEST(BenchReportTest, ReadIsFromThePeer) {
  BenchReport report = SampleReport();
  report.op = "read";
  report.iterations = 1000;
  const std::string text = RenderBenchTable(report);
  EXPECT_THAT(text, HasSubstr("read from 127.0.0.1:7471/rdmad-bench, qd 4, "
                              "1000 ops per size"));
}

// The tests' own JSON reader: protobuf's Struct crashes under
// ThreadSanitizer here (tests/json_reader.h).
JsonValue ParseJson(const std::string& json) {
  auto parsed = JsonValue::Parse(json);
  EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << json;
  return parsed.ok() ? *std::move(parsed) : JsonValue();
}

TEST(BenchReportTest, JsonHasTheSameFields) {
  const std::string json = BenchReportJson(SampleReport());
  ASSERT_FALSE(json.empty());
  EXPECT_EQ(json.back(), '\n');
  const JsonValue parsed = ParseJson(json);
  const JsonValue& f = parsed;
  EXPECT_EQ(f["op"].string(), "write");
  EXPECT_EQ(f["peer"].string(), "127.0.0.1:7471");
  EXPECT_EQ(f["region"].string(), "rdmad-bench");
  EXPECT_EQ(f["qd"].number(), 4);
  EXPECT_EQ(f["batch"].number(), 1);
  EXPECT_EQ(f["window"].number(), 1);
  EXPECT_EQ(f["spin_us"].number(), 30);
  EXPECT_TRUE(f["spin_when_preempted"].boolean());
  EXPECT_TRUE(f["iterations"].is_null());
  EXPECT_EQ(f["duration_s"].number(), 2);
  const auto& results = f["results"].array();
  ASSERT_EQ(results.size(), 2);
  const JsonValue& big = results[1];
  EXPECT_EQ(big["size"].number(), 1 << 20);
  EXPECT_EQ(big["ops"].number(), 1000);
  EXPECT_EQ(big["bytes"].number(), 1000.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(big["seconds"].number(), 2);
  EXPECT_DOUBLE_EQ(big["bytes_per_s"].number(), 524288000);
  EXPECT_DOUBLE_EQ(big["mb_per_s"].number(), 524.288);
  EXPECT_DOUBLE_EQ(big["gbit_per_s"].number(), 4.194304);
  EXPECT_DOUBLE_EQ(big["ops_per_s"].number(), 500);
  EXPECT_DOUBLE_EQ(big["p50_us"].number(), 500);
  EXPECT_DOUBLE_EQ(big["p99_us"].number(), 990);
  EXPECT_DOUBLE_EQ(big["p999_us"].number(), 999);
  EXPECT_EQ(big["transport"].string(), "tcp");
}

TEST(BenchReportTest, HeaderNamesTheBatchAndTheWindow) {
  BenchReport report = SampleReport();
  report.batch = 64;
  report.window = 4;
  EXPECT_THAT(RenderBenchTable(report),
              HasSubstr("qd 4, batch 64, window 4, 2s per size\n"));
  EXPECT_EQ(ParseJson(BenchReportJson(report))["window"].number(), 4);
}

TEST(BenchReportTest, JsonOfIterationsAndNoResults) {
  BenchReport report;
  report.op = "read";
  report.peer = "[::1]:7471";
  report.region = "weird\"name\\";
  report.iterations = 10;
  const JsonValue parsed = ParseJson(BenchReportJson(report));
  const JsonValue& f = parsed;
  EXPECT_EQ(f["iterations"].number(), 10);
  EXPECT_TRUE(f["duration_s"].is_null());
  EXPECT_TRUE(f["spin_us"].is_null()) << "the gRPC path does not spin";
  EXPECT_TRUE(f["spin_when_preempted"].is_null());
  EXPECT_EQ(f["region"].string(), "weird\"name\\");
  EXPECT_EQ(f["results"].array().size(), 0);
}

absl::StatusOr<Invocation> ParseBench(std::vector<std::string> args) {
  return ParseCommandLine(args, nullptr);
}

TEST(BenchArgsTest, Defaults) {
  auto inv = ParseBench({"bench"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->command, Command::kBench);
  const BenchOptions& b = inv->bench;
  EXPECT_EQ(b.peer, "");
  EXPECT_EQ(b.region, "rdmad-bench");
  EXPECT_FALSE(b.create_region);
  EXPECT_EQ(b.op, BenchOp::kWrite);
  EXPECT_THAT(b.sizes, ElementsAre(8u, 4096u, 65536u, 1u << 20, 16u << 20));
  EXPECT_EQ(b.queue_depth, 1);
  EXPECT_FALSE(b.iterations.has_value());
  EXPECT_EQ(b.duration, absl::Seconds(2));
  EXPECT_FALSE(inv->global.json);
}

TEST(BenchArgsTest, AllOptions) {
  auto inv =
      ParseBench({"--socket", "/tmp/a.sock", "bench", "--peer", "10.0.0.2:7471",
             "--region=scratch", "--op", "read", "--sizes", "1,4K,1Mi,1MB",
             "--qd", "8", "--iters", "100", "--json"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  const BenchOptions& b = inv->bench;
  EXPECT_EQ(inv->global.socket_path, "/tmp/a.sock");
  EXPECT_TRUE(inv->global.json);
  EXPECT_EQ(b.peer, "10.0.0.2:7471");
  EXPECT_EQ(b.region, "scratch");
  EXPECT_EQ(b.op, BenchOp::kRead);
  EXPECT_THAT(b.sizes, ElementsAre(1u, 4096u, 1u << 20, 1000000u));
  EXPECT_EQ(b.queue_depth, 8);
  EXPECT_EQ(b.batch, 1);
  EXPECT_EQ(b.iterations, 100u);
}

TEST(BenchArgsTest, BatchIsBounded) {
  auto inv = ParseBench({"bench", "--batch", "32"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->bench.batch, 32);
  for (const char* bad : {"0", "-1", "x", "1025"}) {
    SCOPED_TRACE(bad);
    auto r = ParseBench({"bench", "--batch", bad});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("--batch"));
  }
}

TEST(BenchArgsTest, WindowIsBoundedAndForTheRingPath) {
  auto inv = ParseBench({"bench"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->bench.window, 1);
  inv = ParseBench({"bench", "--batch", "64", "--window", "8"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->bench.batch, 64);
  EXPECT_EQ(inv->bench.window, 8);
  for (const char* bad : {"0", "-1", "x", "65"}) {
    SCOPED_TRACE(bad);
    auto r = ParseBench({"bench", "--window", bad});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("--window"));
  }
  // Every operation in flight fits the thread's queue.
  auto deep = ParseBench({"bench", "--batch", "1024", "--window", "17"});
  ASSERT_FALSE(deep.ok());
  EXPECT_THAT(deep.status().message(), HasSubstr("at most 16384"));
  auto grpc = ParseBench({"bench", "--path", "grpc", "--window", "2"});
  ASSERT_FALSE(grpc.ok());
  EXPECT_THAT(grpc.status().message(), HasSubstr("--path ring only"));
}

TEST(BenchArgsTest, DurationAndCreateRegion) {
  auto inv = ParseBench({"--create-region", "bench", "--duration", "500ms"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_TRUE(inv->bench.create_region);
  EXPECT_EQ(inv->bench.duration, absl::Milliseconds(500));
  inv = ParseBench({"bench", "--duration", "0.25"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->bench.duration, absl::Milliseconds(250));
  inv = ParseBench({"bench", "--duration", "3"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->bench.duration, absl::Seconds(3));
}

TEST(BenchArgsTest, SpinIsATimeForTheRingPath) {
  auto inv = ParseBench({"bench"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->bench.spin, absl::Microseconds(30));
  inv = ParseBench({"bench", "--spin", "2ms"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->bench.spin, absl::Milliseconds(2));
  inv = ParseBench({"bench", "--spin", "0"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->bench.spin, absl::ZeroDuration());
  for (const char* bad : {"2s", "-1us", "fast", "1"}) {
    SCOPED_TRACE(bad);
    auto r = ParseBench({"bench", "--spin", bad});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("--spin"));
  }
  auto grpc = ParseBench({"bench", "--path", "grpc", "--spin", "1ms"});
  ASSERT_FALSE(grpc.ok());
  EXPECT_THAT(grpc.status().message(), HasSubstr("--path ring only"));
}

TEST(BenchArgsTest, SpinWhenPreemptedIsAFlagForTheRingPath) {
  auto inv = ParseBench({"bench"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_FALSE(inv->bench.spin_when_preempted);
  inv = ParseBench({"bench", "--spin", "2ms", "--spin-when-preempted"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_TRUE(inv->bench.spin_when_preempted);
  EXPECT_EQ(inv->bench.spin, absl::Milliseconds(2));
  auto grpc = ParseBench({"bench", "--path", "grpc", "--spin-when-preempted"});
  ASSERT_FALSE(grpc.ok());
  EXPECT_EQ(grpc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(grpc.status().message(), HasSubstr("--path ring only"));
  auto valued = ParseBench({"bench", "--spin-when-preempted=yes"});
  EXPECT_FALSE(valued.ok()) << "a flag takes no value";
}

// A usage error whose message contains `what` and says where to look.
void ExpectUsageError(std::vector<std::string> args, const std::string& what) {
  auto inv = ParseBench(args);
  ASSERT_FALSE(inv.ok()) << "accepted: " << args.back();
  EXPECT_EQ(inv.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(inv.status().message(), HasSubstr(what));
  EXPECT_THAT(inv.status().message(),
              HasSubstr("(see 'rdmactl bench --help')"));
}

TEST(BenchArgsTest, UsageErrors) {
  ExpectUsageError({"bench", "--qd", "0"}, "--qd must be at least 1");
  ExpectUsageError({"bench", "--qd", "-3"}, "--qd '-3' is not a whole number");
  ExpectUsageError({"bench", "--qd", "1000"}, "at most 256");
  ExpectUsageError({"bench", "--iters", "0"}, "--iters must be at least 1");
  ExpectUsageError({"bench", "--iters", "many"}, "not a whole number");
  ExpectUsageError({"bench", "--sizes", "8,0"}, "'0' is 0 bytes");
  ExpectUsageError({"bench", "--sizes", "8,,4K"}, "empty entry");
  ExpectUsageError({"bench", "--sizes", "4Q"}, "--sizes:");
  ExpectUsageError({"bench", "--op", "copy"},
                   "--op 'copy' is not an operation: use write or read");
  ExpectUsageError({"bench", "--duration", "0"}, "positive");
  ExpectUsageError({"bench", "--duration", "soon"}, "not a duration");
  ExpectUsageError({"bench", "--iters", "5", "--duration", "1"},
                   "give one of them");
  ExpectUsageError({"bench", "--peer", "nohost"}, "--peer:");
  ExpectUsageError({"bench", "--region", ".bad"}, "--region:");
  ExpectUsageError({"bench", "--peer", "127.0.0.1:7471", "--create-region"},
                   "only without --peer");
  ExpectUsageError({"bench", "--create-region=yes"}, "takes no value");
  ExpectUsageError({"bench", "extra"}, "expected no arguments");
  ExpectUsageError({"bench", "--length", "4"}, "bench takes no option");
}

TEST(BenchArgsTest, BenchOptionsBelongToBench) {
  auto inv = ParseBench({"status", "--qd", "4"});
  ASSERT_FALSE(inv.ok());
  EXPECT_THAT(inv.status().message(), HasSubstr("status takes no option --qd"));
}

TEST(BenchArgsTest, HelpDescribesTheCommand) {
  const std::string help = CommandUsage("bench");
  EXPECT_THAT(help, HasSubstr("usage: rdmactl bench [--peer HOST:PORT | --local]"));
  EXPECT_THAT(help, HasSubstr("--create-region"));
  EXPECT_THAT(help, HasSubstr("loopback"));
  EXPECT_THAT(Usage(), HasSubstr("  bench [--peer HOST:PORT | --local]"));
  EXPECT_THAT(Usage(), Not(HasSubstr("\n                     [--qd N]")));
}

}  // namespace
}  // namespace rdmad::rdmactl
