// DaemonMetrics: the transfer counters and histogram, counted per thread
// and summed at scrape time; failed transfers carry the peer, and the peers
// they may name stay bounded; the cluster directory gauges, read from the
// directory's state at scrape time (a fake directory here); the devices'
// dma-buf support.
#include "daemon/metrics/daemon_metrics.h"

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/region_table.h"
#include "gtest/gtest.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "tests/unit/fakes/directory_fake.h"
#include "tests/unit/fakes/peer_fakes.h"
#include "tests/unit/fakes/teardown_recorder.h"

namespace rdmad::metrics {
namespace {

using directory::testing::FakeDirectory;

// name{label=value} -> value, for every sample of the families.
std::map<std::string, double> Samples(const DaemonMetrics& metrics) {
  std::map<std::string, double> out;
  for (const auto& family : metrics.collectable()->Collect()) {
    for (const auto& m : family.metric) {
      std::string key = family.name;
      for (const auto& label : m.label) {
        key += "{" + label.name + "=" + label.value + "}";
      }
      out[key] = family.type == prometheus::MetricType::Counter
                     ? m.counter.value
                     : m.gauge.value;
    }
  }
  return out;
}

const prometheus::MetricFamily* Family(
    const std::vector<prometheus::MetricFamily>& families,
    const std::string& name) {
  for (const auto& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

TEST(DaemonMetricsTest, TransfersOfManyThreadsAddUpAtScrape) {
  DaemonMetrics metrics(MetricSources{});
  const std::string p1 = "10.0.0.1:7471";
  const std::string p2 = "10.0.0.2:7471";
  constexpr int kThreads = 4;
  constexpr int kPerThread = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        core::TransferRecord r;
        r.op = core::OpType::kWrite;
        r.peer = i % 2 == 0 ? &p1 : &p2;
        r.transport = core::TransportKind::kTcp;
        r.bytes = 100;
        // Half at 40 us (the 50 us bucket), half at 2 ms (2.5 ms).
        r.latency = i % 4 < 2 ? absl::Microseconds(40) : absl::Milliseconds(2);
        metrics.OnTransferDone(r);
      }
      core::TransferRecord failed;
      failed.op = core::OpType::kRead;
      failed.code = absl::StatusCode::kPermissionDenied;
      metrics.OnTransferDone(failed);
    });
  }
  for (std::thread& t : threads) t.join();

  auto samples = Samples(metrics);
  const int per_peer = kThreads * kPerThread / 2;
  for (const std::string& peer : {p1, p2}) {
    const std::string labels =
        "{op=write}{peer=" + peer + "}{transport=tcp}";
    EXPECT_EQ(samples["rdmad_transfer_operations_total" + labels], per_peer);
    EXPECT_EQ(samples["rdmad_transfer_bytes_total" + labels], 100 * per_peer);
  }
  EXPECT_EQ(
      samples["rdmad_transfer_errors_total{kind=permission_denied}{op=read}"
              "{peer=local}"],
      kThreads);

  // The histogram adds up the peers of one (op, transport).
  const auto families = metrics.collectable()->Collect();
  const prometheus::MetricFamily* latency =
      Family(families, "rdmad_transfer_latency_seconds");
  ASSERT_NE(latency, nullptr);
  EXPECT_EQ(latency->type, prometheus::MetricType::Histogram);
  ASSERT_EQ(latency->metric.size(), 1u);
  const prometheus::ClientMetric::Histogram& h = latency->metric[0].histogram;
  EXPECT_EQ(h.sample_count, uint64_t{kThreads} * kPerThread);
  EXPECT_NEAR(h.sample_sum, kThreads * kPerThread / 2 * (40e-6 + 2e-3), 1e-6);
  ASSERT_EQ(h.bucket.size(), 20u);
  EXPECT_TRUE(std::isinf(h.bucket.back().upper_bound));
  EXPECT_EQ(h.bucket.back().cumulative_count, h.sample_count);
  for (const auto& bucket : h.bucket) {
    const uint64_t expected = bucket.upper_bound < 40e-6  ? 0
                              : bucket.upper_bound < 2e-3 ? h.sample_count / 2
                                                          : h.sample_count;
    EXPECT_EQ(bucket.cumulative_count, expected) << bucket.upper_bound;
  }
  EXPECT_EQ(latency->metric[0].label.size(), 2u);
  for (const char* name :
       {"rdmad_transfer_bytes_total", "rdmad_transfer_operations_total",
        "rdmad_transfer_errors_total"}) {
    const prometheus::MetricFamily* f = Family(families, name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->type, prometheus::MetricType::Counter) << name;
  }
}

TEST(DaemonMetricsTest, TransferFamiliesAreThereBeforeAnyTransfer) {
  DaemonMetrics metrics(MetricSources{});
  const auto families = metrics.collectable()->Collect();
  for (const char* name :
       {"rdmad_transfer_bytes_total", "rdmad_transfer_operations_total",
        "rdmad_transfer_errors_total", "rdmad_transfer_latency_seconds"}) {
    const prometheus::MetricFamily* f = Family(families, name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_TRUE(f->metric.empty()) << name;
  }
}

TEST(DaemonMetricsTest, EachDeviceSaysWhetherItRegistersDmabufs) {
  MetricSources sources;
  sources.devices.resize(2);
  sources.devices[0].name = "mlx5_0";
  sources.devices[0].driver = "mlx5_core";
  sources.devices[0].dmabuf = true;
  sources.devices[1].name = "rxe0";
  sources.devices[1].driver = "rxe";
  DaemonMetrics metrics(sources);
  const auto samples = Samples(metrics);
  EXPECT_EQ(samples.at("rdmad_device_dmabuf{device=mlx5_0}{driver=mlx5_core}"),
            1);
  EXPECT_EQ(samples.at("rdmad_device_dmabuf{device=rxe0}{driver=rxe}"), 0);
  // A TCP-only daemon has no device to describe.
  EXPECT_EQ(Family(DaemonMetrics(MetricSources{}).collectable()->Collect(),
                   "rdmad_device_dmabuf"),
            nullptr);
}

TEST(DaemonMetricsTest, DirectoryGaugesFollowItsState) {
  DaemonMetrics metrics(MetricSources{});
  EXPECT_EQ(Samples(metrics).count("rdmad_directory_connected"), 0u);

  FakeDirectory directory;
  directory.snapshot.state = directory::DirectoryLink::kConnected;
  directory.snapshot.published_regions = 3;
  directory.snapshot.cached_regions = 7;
  directory.snapshot.conflicts = {"kv (held by b:1)"};
  directory.snapshot.reconnects = 2;
  directory.snapshot.lookups_cached = 10;
  directory.snapshot.lookups_store = 4;
  directory.snapshot.lookups_failed = 1;
  metrics.SetDirectory(&directory);
  auto samples = Samples(metrics);
  EXPECT_EQ(samples["rdmad_directory_connected"], 1);
  EXPECT_EQ(samples["rdmad_directory_published_regions"], 3);
  EXPECT_EQ(samples["rdmad_directory_cached_regions"], 7);
  EXPECT_EQ(samples["rdmad_directory_conflicts"], 1);
  EXPECT_EQ(samples["rdmad_directory_reconnects_total"], 2);
  EXPECT_EQ(samples["rdmad_directory_lookups_total{source=cache}"], 10);
  EXPECT_EQ(samples["rdmad_directory_lookups_total{source=etcd}"], 4);
  EXPECT_EQ(samples["rdmad_directory_lookups_total{source=failed}"], 1);

  directory.snapshot.state = directory::DirectoryLink::kDisconnected;
  EXPECT_EQ(Samples(metrics)["rdmad_directory_connected"], 0);
}

TEST(DaemonMetricsTest, RegionTeardownsOffTheLoopsAreCountedAndPendingOnesShown) {
  core::NullRegistrar registrar;
  core::RegionTable regions(
      &registrar, core::RegionLimits{1ull << 30, 1ull << 30, 0, 0, "limit"});
  DaemonMetrics metrics(MetricSources{.regions = &regions});
  auto samples = Samples(metrics);
  EXPECT_EQ(samples["rdmad_region_teardowns_off_loop_total"], 0);
  EXPECT_EQ(samples["rdmad_region_teardowns_pending"], 0);

  core::AllocateOptions o;
  o.name = "r";
  o.size = 4096;
  o.daemon_owned = true;
  auto region = regions.Allocate({1, 1000, 1000, 11}, o);
  ASSERT_TRUE(region.ok()) << region.status();
  ASSERT_TRUE(regions.Free({1, 1000, 1000, 11}, {0, "r"}).ok());
  // Dropped last on a thread that serves, as an event loop's does.
  core::testing::RunOnServingThread("test-loop", [&] { region->reset(); });
  ASSERT_TRUE(regions.releaser().WaitIdle(absl::Seconds(30)));
  samples = Samples(metrics);
  EXPECT_EQ(samples["rdmad_region_teardowns_off_loop_total"], 1);
  EXPECT_EQ(samples["rdmad_region_teardowns_pending"], 0);
}

// The `peer` label values of the samples of `family`.
std::set<std::string> Peers(DaemonMetrics& metrics, const std::string& family) {
  std::set<std::string> peers;
  for (const auto& f : metrics.collectable()->Collect()) {
    if (f.name != family) continue;
    for (const auto& metric : f.metric) {
      for (const auto& label : metric.label) {
        if (label.name == "peer") peers.insert(label.value);
      }
    }
  }
  return peers;
}

void Fail(DaemonMetrics& metrics, const std::string& peer) {
  core::TransferRecord record;
  record.peer = &peer;
  record.code = absl::StatusCode::kNotFound;
  metrics.OnTransferDone(record);
}

TEST(DaemonMetricsTest, RailsAreCountedPerPeerAndRail) {
  peer::testing::FakeTimers timers;
  peer::testing::FakeConnector connector;
  peer::testing::FakeConnector::Remote remote;
  remote.regions["kv"] =
      peer::testing::Region(7, "kv", 4096, core::RemoteAccess::kReadWrite, 0x77);
  const std::string peer = "10.0.0.2:7471";
  connector.SetRemote(peer, remote);
  peer::PeerTable peers(peer::PeerTableOptions{}, &connector, &timers);
  core::NullRegistrar registrar;
  core::RegionTable regions(&registrar, core::RegionLimits{});
  core::AllocateOptions o;
  o.size = 4096;
  o.name = "src";
  o.daemon_owned = true;
  auto src = regions.Allocate(core::Caller{1, 0, 0, 1}, o);
  ASSERT_TRUE(src.ok());
  core::Transfer t;
  t.local = *src;
  t.length = 100;
  t.remote.peer = peer;
  t.remote.name = "kv";
  t.deadline = timers.Now() + absl::Seconds(10);
  t.done = [](absl::StatusOr<core::TransferResult>) {};
  peers.SubmitBatch(absl::MakeSpan(&t, 1));
  ASSERT_EQ(connector.channels(peer).size(), 1u);
  transport::RailInfo up;
  up.device = "mlx5_0";
  up.state = transport::RailStatus::kActive;
  up.bytes = 1 << 20;
  up.ops = 3;
  up.bandwidth = 2.5e9;
  transport::RailInfo down = up;
  down.index = 1;
  down.device = "mlx5_1";
  down.state = transport::RailStatus::kPaused;
  down.errors = 2;
  down.pauses = 1;
  connector.channels(peer)[0]->set_rails({up, down});

  DaemonMetrics metrics(MetricSources{.peers = &peers, .version = "v"});
  const auto samples = Samples(metrics);
  const std::string at = "{peer=" + peer + "}{rail=";
  EXPECT_EQ(samples.at("rdmad_rail_bytes_total" + at + "mlx5_0}"), 1 << 20);
  EXPECT_EQ(samples.at("rdmad_rail_operations_total" + at + "mlx5_0}"), 3);
  EXPECT_EQ(samples.at("rdmad_rail_errors_total" + at + "mlx5_1}"), 2);
  EXPECT_EQ(samples.at("rdmad_rail_pauses_total" + at + "mlx5_1}"), 1);
  EXPECT_EQ(samples.at("rdmad_rail_bandwidth_bytes_per_second" + at +
                       "mlx5_0}"),
            2.5e9);
  EXPECT_EQ(samples.at("rdmad_rails{state=ACTIVE}"), 1);
  EXPECT_EQ(samples.at("rdmad_rails{state=PAUSED}"), 1);
  peers.Shutdown();
}

TEST(DaemonMetricsTest, ErrorsNameThePeer) {
  DaemonMetrics metrics({});
  Fail(metrics, "10.0.0.2:7471");
  Fail(metrics, "");  // a transfer within this daemon
  EXPECT_EQ(Peers(metrics, "rdmad_transfer_errors_total"),
            (std::set<std::string>{"10.0.0.2:7471", "local"}));
}

TEST(DaemonMetricsTest, MistypedPeersCannotGrowTheSeriesWithoutBound) {
  DaemonMetrics metrics({});
  for (int i = 0; i < 1000; ++i) Fail(metrics, absl::StrCat("10.9.", i / 250, ".", i % 250, ":1"));
  const std::set<std::string> peers =
      Peers(metrics, "rdmad_transfer_errors_total");
  EXPECT_LE(peers.size(), 257u);
  EXPECT_EQ(peers.count("other"), 1u);
  // Peers seen before the cap keep their own series.
  Fail(metrics, "10.9.0.0:1");
  EXPECT_EQ(Peers(metrics, "rdmad_transfer_errors_total").count("10.9.0.0:1"),
            1u);
}

}  // namespace
}  // namespace rdmad::metrics
