// DaemonMetrics' cluster directory gauges, read from the directory's state
// at scrape time (a fake directory here).
#include "daemon/metrics/daemon_metrics.h"

#include <map>
#include <string>

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

}  // namespace
}  // namespace rdmad::metrics
