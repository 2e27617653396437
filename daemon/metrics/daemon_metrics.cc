#include "daemon/metrics/daemon_metrics.h"

#include <atomic>

#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"
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

// A descriptor's peer is the transfer's peer (the decoder sets it), so
// the label is the same whichever way the region was named.
std::string PeerLabel(const core::TransferRecord& record) {
  return record.peer == nullptr || record.peer->empty() ? "local"
                                                        : *record.peer;
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
    AddSample(info, {{"transport", std::string(core::TransportKindName(
                                       sources.transport))},
                     {"version", sources.version}},
              1);
    families.push_back(std::move(info));
    if (const directory::ClusterDirectory* d =
            directory.load(std::memory_order_acquire)) {
      AddDirectory(d->state(), families);
    }
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
        ++peer_states[std::string(
            p.state == peer::PeerState::kReady
                ? transport::ChannelStateName(p.channel_state)
                : peer::PeerStateName(p.state))];
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
        ++qp_states[{std::string(core::TransportKindName(c.transport)),
                     c.connection.qp_state.empty()
                         ? std::string(transport::ConnectionStateName(
                               c.connection.state))
                         : c.connection.qp_state}];
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

  static void AddDirectory(const directory::DirectoryState& d,
                           std::vector<MetricFamily>& families) {
    auto gauge = [&families](const char* name, const char* help,
                             double value) {
      MetricFamily family = Gauge(name, help);
      AddSample(family, {}, value);
      families.push_back(std::move(family));
    };
    gauge("rdmad_directory_connected",
          "1 while the cluster directory (etcd) is reached", 
          d.state == "connected" ? 1 : 0);
    gauge("rdmad_directory_published_regions",
          "Region keys this daemon holds in the cluster directory",
          static_cast<double>(d.published_regions));
    gauge("rdmad_directory_cached_regions",
          "Cluster directory entries in this daemon's cache",
          static_cast<double>(d.cached_regions));
    gauge("rdmad_directory_conflicts",
          "Regions exported here whose name another daemon holds",
          static_cast<double>(d.conflicts.size()));
    MetricFamily reconnects = Gauge("rdmad_directory_reconnects_total",
                                    "New etcd sessions after losing etcd");
    reconnects.type = MetricType::Counter;
    ClientMetric r;
    r.counter.value = static_cast<double>(d.reconnects);
    reconnects.metric.push_back(std::move(r));
    families.push_back(std::move(reconnects));
    MetricFamily lookups = Gauge("rdmad_directory_lookups_total",
                                 "Look-ups by name, by where they were "
                                 "answered (failed: not found or unreachable)");
    lookups.type = MetricType::Counter;
    for (const auto& [source, n] :
         {std::pair<const char*, uint64_t>{"cache", d.lookups_cached},
          {"etcd", d.lookups_store},
          {"failed", d.lookups_failed}}) {
      ClientMetric m;
      m.label = {{"source", source}};
      m.counter.value = static_cast<double>(n);
      lookups.metric.push_back(std::move(m));
    }
    families.push_back(std::move(lookups));
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
  std::atomic<const directory::ClusterDirectory*> directory{nullptr};
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

void DaemonMetrics::OnTransferDone(const core::TransferRecord& record) {
  const std::string op(core::OpName(record.op));
  if (record.code != absl::StatusCode::kOk) {
    // "NOT_FOUND" -> "not_found": label values in the usual metric style.
    state_->errors
        .Add({{"peer", state_->ErrorPeerLabel(PeerLabel(record))},
              {"op", op},
              {"kind",
               absl::AsciiStrToLower(absl::StatusCodeToString(record.code))}})
        .Increment();
    return;
  }
  const std::string transport(core::TransportKindName(record.transport));
  // Family::Add returns the existing series for labels seen before.
  const prometheus::Labels labels = {
      {"peer", PeerLabel(record)}, {"op", op}, {"transport", transport}};
  state_->bytes.Add(labels).Increment(static_cast<double>(record.bytes));
  state_->operations.Add(labels).Increment();
  state_->latency.Add({{"op", op}, {"transport", transport}}, LatencyBuckets())
      .Observe(absl::ToDoubleSeconds(record.latency));
}

void DaemonMetrics::SetDirectory(
    const directory::ClusterDirectory* directory) {
  state_->directory.store(directory, std::memory_order_release);
}

std::shared_ptr<prometheus::Collectable> DaemonMetrics::collectable() const {
  return state_;
}

}  // namespace rdmad::metrics
