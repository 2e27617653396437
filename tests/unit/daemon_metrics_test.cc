// rdmad's Prometheus metrics (daemon/metrics/daemon_metrics.h): the cluster
// directory gauges, read from the directory's state at scrape time (a fake
// directory here); failed transfers carry the peer, and the peers they may
// name stay bounded.
#include "daemon/metrics/daemon_metrics.h"

#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace rdmad::metrics {
namespace {

class FakeDirectory : public directory::ClusterDirectory {
 public:
  void Resolve(const std::string&, absl::Time, core::DirectoryGeneration,
               core::ResolveDone) override {}
  std::string self_node() const override { return "self:1"; }
  void OnRegionChanged(const std::string&) override {}
  void Claim(const std::string&, absl::Time,
             std::function<void(absl::Status)>) override {}
  void Lookup(const std::string&, absl::Time, bool,
              std::function<void(absl::StatusOr<core::DirectoryEntry>, bool)>)
      override {}
  void List(const std::string&, absl::Time,
            std::function<void(absl::StatusOr<directory::DirectoryListing>)>)
      override {}
  directory::DirectoryState state() const override { return state_; }

  directory::DirectoryState state_;
};

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

TEST(DaemonMetricsTest, DirectoryGaugesFollowItsState) {
  DaemonMetrics metrics(MetricSources{});
  EXPECT_EQ(Samples(metrics).count("rdmad_directory_connected"), 0u);

  FakeDirectory directory;
  directory.state_.state = "connected";
  directory.state_.published_regions = 3;
  directory.state_.cached_regions = 7;
  directory.state_.conflicts = {"kv (held by b:1)"};
  directory.state_.reconnects = 2;
  directory.state_.lookups_cached = 10;
  directory.state_.lookups_store = 4;
  directory.state_.lookups_failed = 1;
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

  directory.state_.state = "disconnected";
  EXPECT_EQ(Samples(metrics)["rdmad_directory_connected"], 0);
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
