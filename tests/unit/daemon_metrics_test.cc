// rdmad's Prometheus metrics (daemon/metrics/daemon_metrics.h): failed
// transfers carry the peer, and the peers they may name stay bounded.
#include "daemon/metrics/daemon_metrics.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace rdmad::metrics {
namespace {

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
  core::TransferRequest request;
  request.peer = peer;
  request.remote_name = "kv";
  metrics.OnTransferDone(request, absl::NotFoundError("no such region"));
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
