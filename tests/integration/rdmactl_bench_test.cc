// `rdmactl bench` end to end: real rdmad daemons as child processes on
// loopback, rdmactl run as a process against one of them.
//
//   - A benchmarks writes into a region that B exports: --json has every
//     size with ops > 0, bytes/s > 0 and the transport; nothing on stderr
//     (it is not a terminal);
//   - --op read with --duration, printed as a table;
//   - without --peer, --create-region makes the region on A, loops back
//     through A's own peer address, and frees it afterwards;
//   - a missing or too small region, and a peer killed mid-run, stop the
//     bench with exit 1 and a message saying what failed; bad flags exit 2.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"
#include "tests/json_reader.h"

namespace rdmad {
namespace {

using ::rdmad::testing::Connect;
using ::rdmad::testing::DaemonProcess;
using ::rdmad::testing::HasRegion;
using ::rdmad::testing::JsonValue;
using ::rdmad::testing::ProcessResult;
using ::rdmad::testing::RdmactlBinary;
using ::rdmad::testing::RunProcess;
using ::rdmad::testing::StartDaemonOrNull;
using ::rdmad::testing::TempDir;
using ::rdmad::testing::TestTransport;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

class RdmactlBenchTest : public ::testing::Test {
 protected:
  // The region table counts against RLIMIT_MEMLOCK (often 8 MiB in
  // containers): lift the budget, as transfer_test does.
  std::unique_ptr<DaemonProcess> StartDaemon(const std::string& name) {
    return StartDaemonOrNull(
        dir_, name, {.config = "max_pinned_bytes: 4294967296\n"});
  }

  // Daemons A and B, B exporting "rdmad-bench" (1 MiB, rw) for A to
  // bench against; false, with the failure recorded, when one is missing.
  bool StartPeers() {
    a_ = StartDaemon("a");
    b_ = StartDaemon("b");
    if (a_ == nullptr || b_ == nullptr) {
      ADD_FAILURE() << "a daemon did not start";
      return false;
    }
    auto cb = Connect(*b_);
    if (cb == nullptr) {
      ADD_FAILURE() << "cannot connect to daemon b";
      return false;
    }
    const auto created =
        cb->CreateRegion("rdmad-bench", 1 << 20, Access::kReadWrite);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok();
  }

  // The one peer `daemon` has, as ListPeers shows it; none, with the
  // failure recorded, when it cannot be read or there is not exactly one.
  static std::optional<PeerInfo> OnlyPeer(const DaemonProcess& daemon) {
    auto client = Connect(daemon);
    if (client == nullptr) {
      ADD_FAILURE() << "cannot connect to " << daemon.socket();
      return std::nullopt;
    }
    auto peers = client->ListPeers();
    if (!peers.ok()) {
      ADD_FAILURE() << peers.status();
      return std::nullopt;
    }
    if (peers->size() != 1u) {
      ADD_FAILURE() << "expected one peer, found " << peers->size();
      return std::nullopt;
    }
    return (*peers)[0];
  }

  // rdmactl --socket <daemon> bench ARGS...
  static ProcessResult Bench(const DaemonProcess& daemon,
                             std::vector<std::string> args,
                             absl::Duration timeout = absl::Seconds(120)) {
    std::vector<std::string> argv = {RdmactlBinary(), "--socket",
                                     daemon.socket(), "bench"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, "", timeout);
  }

  // rdmactl's JSON, read with the tests' own reader (tests/json_reader.h:
  // protobuf's Struct crashes under ThreadSanitizer here).
  static JsonValue ParseJson(const std::string& json) {
    auto parsed = JsonValue::Parse(json);
    EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << json;
    return parsed.ok() ? *std::move(parsed) : JsonValue();
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> a_;  // StartPeers
  std::unique_ptr<DaemonProcess> b_;
};

TEST_F(RdmactlBenchTest, WritesToAPeerAndPrintsJson) {
  ASSERT_TRUE(StartPeers());
  DaemonProcess* a = a_.get();
  DaemonProcess* b = b_.get();

  const ProcessResult out =
      Bench(*a, {"--peer", b->peer_address(), "--sizes", "8,4K,64K", "--qd",
                 "2", "--iters", "200", "--json"});
  ASSERT_EQ(out.exit_code, 0) << out.err << out.out;
  EXPECT_EQ(out.err, "");  // stderr is not a terminal: no progress line
  const JsonValue json = ParseJson(out.out);
  const JsonValue& f = json;
  EXPECT_EQ(f["op"].string(), "write");
  EXPECT_EQ(f["peer"].string(), b->peer_address());
  EXPECT_EQ(f["region"].string(), "rdmad-bench");
  EXPECT_EQ(f["qd"].number(), 2);
  EXPECT_EQ(f["iterations"].number(), 200);
  const auto& results = f["results"].array();
  ASSERT_EQ(results.size(), 3);
  const double sizes[] = {8, 4096, 65536};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(absl::StrCat("result ", i));
    const auto& r = results[i];
    EXPECT_EQ(r["size"].number(), sizes[i]);
    EXPECT_EQ(r["ops"].number(), 200);
    EXPECT_EQ(r["bytes"].number(), 200 * sizes[i]);
    EXPECT_GT(r["seconds"].number(), 0);
    EXPECT_GT(r["bytes_per_s"].number(), 0);
    EXPECT_GT(r["mb_per_s"].number(), 0);
    EXPECT_GT(r["ops_per_s"].number(), 0);
    EXPECT_GT(r["p50_us"].number(), 0);
    EXPECT_GE(r["p99_us"].number(), r["p50_us"].number());
    EXPECT_GE(r["p999_us"].number(), r["p99_us"].number());
    EXPECT_EQ(r["transport"].string(), TestTransport());
  }

  // B saw the traffic as a peer of A.
  const std::optional<PeerInfo> peer = OnlyPeer(*a);
  ASSERT_TRUE(peer.has_value());
  EXPECT_GE(peer->ops_completed, 600u);
}

TEST_F(RdmactlBenchTest, BatchesSeveralOperationsPerCall) {
  ASSERT_TRUE(StartPeers());
  DaemonProcess* a = a_.get();
  DaemonProcess* b = b_.get();

  // 100 operations in calls of 16: six full batches and one of 4.
  const ProcessResult out =
      Bench(*a, {"--peer", b->peer_address(), "--sizes", "64K", "--batch",
                 "16", "--iters", "100", "--op", "read", "--json"});
  ASSERT_EQ(out.exit_code, 0) << out.err << out.out;
  const JsonValue json = ParseJson(out.out);
  const JsonValue& f = json;
  EXPECT_EQ(f["batch"].number(), 16);
  const auto& results = f["results"].array();
  ASSERT_EQ(results.size(), 1);
  const auto& r = results[0];
  EXPECT_EQ(r["ops"].number(), 100);
  EXPECT_EQ(r["bytes"].number(), 100 * 65536);
  EXPECT_EQ(r["transport"].string(), TestTransport());
  EXPECT_TRUE(r["daemon_p50_us"].is_null());

  // The peer moved every operation: 100 plus the warm-up.
  const std::optional<PeerInfo> peer = OnlyPeer(*a);
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->bytes_read, 101u * 65536);
}

TEST_F(RdmactlBenchTest, AWindowKeepsSeveralBatchesInFlight) {
  ASSERT_TRUE(StartPeers());
  DaemonProcess* a = a_.get();
  DaemonProcess* b = b_.get();

  // 1,000 operations in batches of 16, 4 batches in flight on each of two
  // threads: 62 full batches and one of 8, each counted once.
  const ProcessResult out =
      Bench(*a, {"--peer", b->peer_address(), "--sizes", "4K", "--qd", "2",
                 "--batch", "16", "--window", "4", "--iters", "1000",
                 "--op", "read", "--json"});
  ASSERT_EQ(out.exit_code, 0) << out.err << out.out;
  const JsonValue json = ParseJson(out.out);
  const JsonValue& f = json;
  EXPECT_EQ(f["batch"].number(), 16);
  EXPECT_EQ(f["window"].number(), 4);
  const auto& results = f["results"].array();
  ASSERT_EQ(results.size(), 1);
  const auto& r = results[0];
  EXPECT_EQ(r["ops"].number(), 1000);
  EXPECT_EQ(r["bytes"].number(), 1000 * 4096);
  EXPECT_GT(r["p50_us"].number(), 0);
  EXPECT_EQ(r["transport"].string(), TestTransport());

  // The peer moved every operation, and no more: 1,000 plus the warm-up.
  const std::optional<PeerInfo> peer = OnlyPeer(*a);
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->bytes_read, 1001u * 4096);

  // Table form names the window; a run bounded by time ends too.
  const ProcessResult table =
      Bench(*a, {"--peer", b->peer_address(), "--sizes", "8", "--batch", "8",
                 "--window", "3", "--duration", "300ms"});
  ASSERT_EQ(table.exit_code, 0) << table.err << table.out;
  EXPECT_THAT(table.out, HasSubstr("batch 8, window 3"));
}

TEST_F(RdmactlBenchTest, ReadsForADurationAndPrintsATable) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  auto cb = Connect(*b);
  ASSERT_TRUE(cb);
  ASSERT_TRUE(cb->CreateRegion("scratch", 64 << 10, Access::kRead).ok());

  const absl::Time start = absl::Now();
  const ProcessResult out =
      Bench(*a, {"--peer", b->peer_address(), "--region", "scratch", "--op",
                 "read", "--sizes", "4K,64K", "--duration", "300ms"});
  ASSERT_EQ(out.exit_code, 0) << out.err << out.out;
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(out.err, "");
  EXPECT_THAT(out.out,
              HasSubstr(absl::StrCat("read from ", b->peer_address(),
                                     "/scratch, qd 1, 300ms per size")));
  EXPECT_THAT(out.out, HasSubstr("P99.9(us)"));
  EXPECT_THAT(out.out, HasSubstr("4 KiB"));
  EXPECT_THAT(out.out, HasSubstr("64 KiB"));
  EXPECT_THAT(out.out, HasSubstr(TestTransport()));
}

TEST_F(RdmactlBenchTest, LoopsBackThroughTheLocalDaemonWithCreateRegion) {
  auto a = StartDaemon("a");
  ASSERT_TRUE(a);
  auto ca = Connect(*a);
  ASSERT_TRUE(ca);

  // Without the region and without --create-region: says what to do.
  ProcessResult out = Bench(*a, {"--sizes", "4K", "--iters", "10"});
  EXPECT_EQ(out.exit_code, 4) << out.out;  // NOT_FOUND
  EXPECT_THAT(out.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(out.err, HasSubstr("--create-region"));

  out = Bench(*a, {"--create-region", "--sizes", "4K,1M", "--iters", "50",
                   "--qd", "3", "--json"});
  ASSERT_EQ(out.exit_code, 0) << out.err << out.out;
  EXPECT_EQ(out.err, "");
  const JsonValue json = ParseJson(out.out);
  EXPECT_EQ(json["peer"].string(), a->peer_address());
  const auto& results = json["results"].array();
  ASSERT_EQ(results.size(), 2);
  for (const auto& result : results) {
    const auto& r = result;
    EXPECT_EQ(r["ops"].number(), 50);
    EXPECT_GT(r["bytes_per_s"].number(), 0);
    EXPECT_EQ(r["transport"].string(), TestTransport());
  }
  // The scratch region is gone again; the loopback went through the
  // transport (A is its own peer), not a local copy.
  EXPECT_FALSE(HasRegion(*ca, "rdmad-bench"));
  const std::optional<PeerInfo> peer = OnlyPeer(*a);
  ASSERT_TRUE(peer.has_value());
  EXPECT_EQ(peer->address, a->peer_address());

  // An existing region is used as it is, and kept.
  ASSERT_TRUE(
      ca->CreateRegion("rdmad-bench", 8 << 10, Access::kReadWrite).ok());
  out = Bench(*a, {"--create-region", "--sizes", "8K", "--iters", "5"});
  ASSERT_EQ(out.exit_code, 0) << out.err << out.out;
  EXPECT_TRUE(HasRegion(*ca, "rdmad-bench"));
  // ... unless it is too small.
  out = Bench(*a, {"--sizes", "16K", "--iters", "5"});
  EXPECT_EQ(out.exit_code, 7) << out.out;  // OUT_OF_RANGE
  EXPECT_THAT(out.err, HasSubstr("OUT_OF_RANGE"));
  EXPECT_THAT(out.err, HasSubstr("less than the largest size"));
}

TEST_F(RdmactlBenchTest, FailedTransfersStopTheBench) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  auto cb = Connect(*b);
  ASSERT_TRUE(cb);

  // No such region on the peer.
  ProcessResult out =
      Bench(*a, {"--peer", b->peer_address(), "--iters", "10", "--json"});
  EXPECT_EQ(out.exit_code, 4);  // NOT_FOUND
  // With --json, the error as JSON on stdout too.
  const JsonValue parsed = ParseJson(out.out);
  const JsonValue& error = parsed["error"];
  EXPECT_EQ(error["code"].string(), "NOT_FOUND");
  EXPECT_EQ(error["exit_status"].number(), 4);
  EXPECT_THAT(error["message"].string(),
              HasSubstr("rdmactl alloc rdmad-bench 16Mi --export rw"));
  EXPECT_THAT(out.err, HasSubstr("rdmactl: bench write 8 B to "));
  EXPECT_THAT(out.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(out.err, HasSubstr("rdmactl alloc rdmad-bench 16Mi --export rw"));

  // Too small for the largest size: the sizes before it ran, then it stops.
  ASSERT_TRUE(
      cb->CreateRegion("rdmad-bench", 64 << 10, Access::kReadWrite).ok());
  out = Bench(
      *a, {"--peer", b->peer_address(), "--sizes", "4K,1M", "--iters", "10"});
  EXPECT_EQ(out.exit_code, 7);  // OUT_OF_RANGE
  EXPECT_THAT(out.err, HasSubstr("bench write 1 MiB to "));
  EXPECT_THAT(out.err, HasSubstr("OUT_OF_RANGE"));

  // Not exported for reading.
  ASSERT_TRUE(cb->Export("rdmad-bench", Access::kWrite).ok());
  out = Bench(*a, {"--peer", b->peer_address(), "--op", "read", "--sizes", "4K",
                   "--iters", "10"});
  EXPECT_EQ(out.exit_code, 5);  // PERMISSION_DENIED
  EXPECT_THAT(out.err, HasSubstr("bench read 4 KiB from "));
  EXPECT_THAT(out.err, HasSubstr("PERMISSION_DENIED"));

  // The peer dies in the middle of a run.
  std::thread killer([&b] {
    absl::SleepFor(absl::Milliseconds(1500));
    b->Kill();
  });
  const absl::Time start = absl::Now();
  out = Bench(*a, {"--peer", b->peer_address(), "--sizes", "4K", "--duration",
                   "20", "--qd", "2", "--timeout", "5s"});
  killer.join();
  // UNAVAILABLE, or DEADLINE_EXCEEDED if --timeout ends it first.
  EXPECT_THAT(out.exit_code, AnyOf(3, 9)) << out.out;
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  EXPECT_EQ(out.out, "");
  EXPECT_THAT(out.err, HasSubstr("rdmactl: bench write 4 KiB to "));
  EXPECT_THAT(out.err, HasSubstr("(operation "));
}

// --path grpc measures the Local calls, --local a copy inside the daemon;
// both print the one JSON dialect (numbers as numbers).
TEST_F(RdmactlBenchTest, GrpcPathAndLocalCopies) {
  ASSERT_TRUE(StartPeers());
  DaemonProcess* a = a_.get();
  DaemonProcess* b = b_.get();
  ProcessResult out =
      Bench(*a, {"--peer", b->peer_address(), "--path", "grpc", "--sizes",
                 "4K", "--iters", "20", "--batch", "4", "--json"});
  ASSERT_EQ(out.exit_code, 0) << out.err << out.out;
  JsonValue json = ParseJson(out.out);
  ASSERT_EQ(json["results"].array().size(), 1u);
  EXPECT_TRUE(json["results"][0]["ops"].is_number());
  EXPECT_EQ(json["results"][0]["ops"].number(), 20);
  EXPECT_EQ(json["results"][0]["transport"].string(), TestTransport());

  out = Bench(*a, {"--local", "--create-region", "--sizes", "4K,64K",
                   "--iters", "20", "--json"});
  ASSERT_EQ(out.exit_code, 0) << out.err << out.out;
  json = ParseJson(out.out);
  EXPECT_EQ(json["peer"].string(), "local");
  ASSERT_EQ(json["results"].array().size(), 2u);
  for (const JsonValue& r : json["results"].array()) {
    EXPECT_EQ(r["ops"].number(), 20);
    EXPECT_EQ(r["transport"].string(), "local");
  }
  // --local and --peer do not go together.
  out = Bench(*a, {"--local", "--peer", b->peer_address()});
  EXPECT_EQ(out.exit_code, 2);
  EXPECT_THAT(out.err, HasSubstr("--local and --peer"));
}

// --local copies inside the daemon: like rdmactl copy between local
// regions, the region need not be exported, and a user the region's mode
// refuses is told to ask for chmod/chgrp or to bench a region of its own.
TEST_F(RdmactlBenchTest, LocalNeedsNoExportAndNamesTheFixForPermissions) {
  auto a = StartDaemon("a");
  ASSERT_TRUE(a);
  auto ca = Connect(*a);
  ASSERT_TRUE(ca);
  ASSERT_TRUE(ca->CreateRegion("priv", 64 << 10, Access::kNone).ok());
  ProcessResult out = Bench(*a, {"--local", "--region", "priv", "--sizes",
                                 "4K", "--iters", "5", "--json"});
  ASSERT_EQ(out.exit_code, 0) << out.err << out.out;
  EXPECT_EQ(ParseJson(out.out)["results"][0]["ops"].number(), 5);

  if (::geteuid() != 0) {
    GTEST_SKIP() << "running bench as another uid needs root (setpriv)";
  }
  // nobody must reach the socket inside our private temp dir.
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  const std::vector<std::string> argv = {
      "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
      RdmactlBinary(), "--socket", a->socket(), "bench", "--local",
      "--region", "priv", "--sizes", "4K", "--iters", "5"};
  out = RunProcess(argv, "", absl::Seconds(60));
  EXPECT_EQ(out.exit_code, 5) << out.err;  // PERMISSION_DENIED
  EXPECT_THAT(out.err, HasSubstr("rdmactl chmod"));
  EXPECT_THAT(out.err, HasSubstr("--region NAME --create-region"));
  EXPECT_THAT(out.err, Not(HasSubstr("on the node of")));
  EXPECT_THAT(out.err, Not(HasSubstr("rdmactl export")));
}

TEST_F(RdmactlBenchTest, BadFlagsAreUsageErrors) {
  auto a = StartDaemon("a");
  ASSERT_TRUE(a);
  const std::vector<std::vector<std::string>> cases = {
      {"--qd", "0"},
      {"--sizes", "0"},
      {"--op", "fetch"},
      {"--path", "rdma"},
      {"--peer", a->peer_address(), "--create-region"},
  };
  for (const auto& args : cases) {
    SCOPED_TRACE(args[0]);
    const ProcessResult out = Bench(*a, args);
    EXPECT_EQ(out.exit_code, 2);
    EXPECT_EQ(out.out, "");
    EXPECT_THAT(out.err, HasSubstr("(see 'rdmactl bench --help')"));
    EXPECT_THAT(out.err, Not(HasSubstr("\n\n")));
  }
}

}  // namespace
}  // namespace rdmad
