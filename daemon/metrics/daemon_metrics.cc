#include "daemon/metrics/daemon_metrics.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"
#include "daemon/peer/descriptor_codec.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace rdmad::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// 10 us .. 10 s: from a small verbs WRITE on one host to a large transfer
// over a congested link, with a factor of 2-2.5 between buckets.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3,
      25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0, 2.5, 5.0, 10.0};
  return *buckets;
}

const char* OpName(core::OpType op) {
  return op == core::OpType::kWrite ? "write" : "read";
}

std::string PeerLabel(const core::TransferRequest& request) {
  if (!request.peer.empty()) return request.peer;
  if (request.remote_descriptor.empty()) return "local";
  // A descriptor names its daemon inside: decoding it again here (a few
  // hundred bytes) keeps the label the same whichever way the region was
  // named.
  auto decoded = peer::DecodeDescriptor(request.remote_descriptor);
  return decoded.ok() && !decoded->peer().empty() ? decoded->peer()
                                                  : "descriptor";
}

MetricFamily Gauge(std::string name, std::string help) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = MetricType::Gauge;
  return family;
}

void AddSample(MetricFamily& family,
               std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
}

}  // namespace

// The registry of counters plus scrape-time gauges, as one Collectable.
struct DaemonMetrics::State final : public prometheus::Collectable {
  explicit State(MetricSources s)
      : sources(std::move(s)),
        registry(std::make_shared<prometheus::Registry>()),
        bytes(prometheus::BuildCounter()
                  .Name("rdmad_transfer_bytes_total")
                  .Help("Bytes moved by completed transfers")
                  .Register(*registry)),
        operations(prometheus::BuildCounter()
                       .Name("rdmad_transfer_operations_total")
                       .Help("Transfers completed successfully")
                       .Register(*registry)),
        errors(prometheus::BuildCounter()
                   .Name("rdmad_transfer_errors_total")
                   .Help("Transfers failed, by status code")
                   .Register(*registry)),
        latency(prometheus::BuildHistogram()
                    .Name("rdmad_transfer_latency_seconds")
                    .Help("Time from a transfer's start in the daemon to its "
                          "completion")
                    .Register(*registry)) {}

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> families = registry->Collect();
    MetricFamily info = Gauge("rdmad_build_info",
                              "rdmad version and data transport (always 1)");
    AddSample(info, {{"transport", sources.transport},
                     {"version", sources.version}},
              1);
    families.push_back(std::move(info));
    if (sources.regions != nullptr) {
      const core::RegionTotals totals = sources.regions->Totals();
      MetricFamily regions = Gauge("rdmad_regions", "Registered regions");
      AddSample(regions, {}, static_cast<double>(totals.count));
      MetricFamily bytes =
          Gauge("rdmad_region_bytes", "Bytes of all regions, as requested");
      AddSample(bytes, {}, static_cast<double>(totals.bytes));
      MetricFamily pinned =
          Gauge("rdmad_pinned_bytes", "Bytes pinned for all regions");
      AddSample(pinned, {}, static_cast<double>(totals.pinned_bytes));
      families.push_back(std::move(regions));
      families.push_back(std::move(bytes));
      families.push_back(std::move(pinned));
    }
    if (sources.sessions != nullptr) {
      MetricFamily sessions = Gauge("rdmad_sessions", "Open client sessions");
      AddSample(sessions, {}, static_cast<double>(sources.sessions->size()));
      families.push_back(std::move(sessions));
    }
    if (sources.peers != nullptr) {
      std::map<std::string, int> peer_states;
      for (const peer::PeerSnapshot& p : sources.peers->ListPeers()) {
        ++peer_states[p.state];
      }
      MetricFamily peers = Gauge("rdmad_peers", "Remote daemons by state");
      for (const auto& [state, n] : peer_states) {
        AddSample(peers, {{"state", state}}, n);
      }
      families.push_back(std::move(peers));
      // TCP connections report IDLE/CONNECTING/READY/ERROR, verbs QPs their
      // ibv_qp_state (RTS, ERR...); the device tells which is which.
      std::map<std::pair<std::string, std::string>, int> qp_states;
      for (const peer::ConnectionSnapshot& c :
           sources.peers->ListConnections()) {
        ++qp_states[{c.connection.device.empty() ? "tcp" : "verbs",
                     c.connection.state}];
      }
      MetricFamily qps = Gauge(
          "rdmad_qps", "Queue pairs (verbs) or data connections (tcp) by state");
      for (const auto& [key, n] : qp_states) {
        AddSample(qps, {{"state", key.second}, {"transport", key.first}}, n);
      }
      families.push_back(std::move(qps));
    }
    return families;
  }

  // The peer label of a failed transfer. Any address a client types ends
  // up here, reachable or not, so the distinct values are capped: past
  // kMaxErrorPeers, new ones count as "other" and the series stay bounded.
  std::string ErrorPeerLabel(std::string peer) {
    absl::MutexLock lock(&error_peers_mu);
    if (error_peers.contains(peer)) return peer;
    if (error_peers.size() >= kMaxErrorPeers) return "other";
    error_peers.insert(peer);
    return peer;
  }

  static constexpr size_t kMaxErrorPeers = 256;
  const MetricSources sources;
  absl::Mutex error_peers_mu;
  absl::flat_hash_set<std::string> error_peers
      ABSL_GUARDED_BY(error_peers_mu);
  const std::shared_ptr<prometheus::Registry> registry;
  // Families live in the registry; these references stay valid with it.
  prometheus::Family<prometheus::Counter>& bytes;
  prometheus::Family<prometheus::Counter>& operations;
  prometheus::Family<prometheus::Counter>& errors;
  prometheus::Family<prometheus::Histogram>& latency;
};

DaemonMetrics::DaemonMetrics(MetricSources sources)
    : state_(std::make_shared<State>(std::move(sources))) {}

DaemonMetrics::~DaemonMetrics() = default;

void DaemonMetrics::OnTransferDone(
    const core::TransferRequest& request,
    const absl::StatusOr<core::TransferResult>& result) {
  const char* op = OpName(request.op);
  if (!result.ok()) {
    // "NOT_FOUND" -> "not_found": label values in the usual metric style.
    state_->errors
        .Add({{"peer", state_->ErrorPeerLabel(PeerLabel(request))},
              {"op", op},
              {"kind", absl::AsciiStrToLower(
                           absl::StatusCodeToString(result.status().code()))}})
        .Increment();
    return;
  }
  // Family::Add returns the existing series for labels seen before.
  const prometheus::Labels labels = {{"peer", PeerLabel(request)},
                                     {"op", op},
                                     {"transport", result->transport}};
  state_->bytes.Add(labels).Increment(static_cast<double>(result->bytes));
  state_->operations.Add(labels).Increment();
  state_->latency
      .Add({{"op", op}, {"transport", result->transport}}, LatencyBuckets())
      .Observe(absl::ToDoubleSeconds(result->latency));
}

std::shared_ptr<prometheus::Collectable> DaemonMetrics::collectable() const {
  return state_;
}

}  // namespace rdmad::metrics
