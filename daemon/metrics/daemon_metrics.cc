#include "daemon/metrics/daemon_metrics.h"

#include <atomic>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "daemon/core/region_releaser.h"
#include "daemon/metrics/transfer_stats.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace rdmad::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

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

MetricFamily Counter(std::string name, std::string help) {
  MetricFamily family = Gauge(std::move(name), std::move(help));
  family.type = MetricType::Counter;
  return family;
}

void AddCount(MetricFamily& family, std::vector<ClientMetric::Label> labels,
              double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.counter.value = value;
  family.metric.push_back(std::move(metric));
}

// The transfer counters and the latency histogram, from the per-thread
// counts summed at this scrape. Labels in name order, as prometheus-cpp's
// own families list them.
void AddTransfers(const TransferStats::Totals& totals,
                  std::vector<MetricFamily>& families) {
  MetricFamily bytes = Counter("rdmad_transfer_bytes_total",
                               "Bytes moved by completed transfers");
  MetricFamily operations = Counter("rdmad_transfer_operations_total",
                                    "Transfers completed successfully");
  MetricFamily errors = Counter("rdmad_transfer_errors_total",
                                "Transfers failed, by status code");
  MetricFamily latency;
  latency.name = "rdmad_transfer_latency_seconds";
  latency.help =
      "Time from a transfer's start in the daemon to its completion";
  latency.type = MetricType::Histogram;

  // The histogram has no peer label: peers of one (op, transport) add up.
  std::map<std::pair<core::OpType, core::TransportKind>, TransferStats::Series>
      by_op;
  for (const auto& [key, s] : totals.series) {
    const std::string op(core::OpName(key.op));
    const std::string transport(core::TransportKindName(key.transport));
    const std::vector<ClientMetric::Label> labels = {
        {"op", op}, {"peer", key.peer}, {"transport", transport}};
    AddCount(bytes, labels, static_cast<double>(s.bytes));
    AddCount(operations, labels, static_cast<double>(s.operations));
    TransferStats::Series& sum = by_op[{key.op, key.transport}];
    sum.operations += s.operations;
    sum.latency_sum += s.latency_sum;
    for (size_t b = 0; b < s.buckets.size(); ++b) sum.buckets[b] += s.buckets[b];
  }
  for (const auto& [key, s] : by_op) {
    ClientMetric metric;
    metric.label = {{"op", std::string(core::OpName(key.first))},
                    {"transport",
                     std::string(core::TransportKindName(key.second))}};
    uint64_t cumulative = 0;
    for (size_t b = 0; b < s.buckets.size(); ++b) {
      cumulative += s.buckets[b];
      ClientMetric::Bucket bucket;
      bucket.cumulative_count = cumulative;
      bucket.upper_bound = b < kLatencyBuckets.size()
                               ? kLatencyBuckets[b]
                               : std::numeric_limits<double>::infinity();
      metric.histogram.bucket.push_back(bucket);
    }
    metric.histogram.sample_count = cumulative;
    metric.histogram.sample_sum = s.latency_sum;
    latency.metric.push_back(std::move(metric));
  }
  for (const auto& [key, n] : totals.errors) {
    // "NOT_FOUND" -> "not_found": label values in the usual metric style.
    const auto& [peer, op, code] = key;
    AddCount(errors,
             {{"kind", absl::AsciiStrToLower(absl::StatusCodeToString(code))},
              {"op", std::string(core::OpName(op))},
              {"peer", peer}},
             static_cast<double>(n));
  }
  families.push_back(std::move(bytes));
  families.push_back(std::move(operations));
  families.push_back(std::move(errors));
  families.push_back(std::move(latency));
}

}  // namespace

// The per-thread transfer counts plus scrape-time gauges, as one
// Collectable.
struct DaemonMetrics::State final : public prometheus::Collectable {
  explicit State(MetricSources s) : sources(std::move(s)) {}

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> families;
    AddTransfers(transfers.Snapshot(), families);
    MetricFamily info = Gauge("rdmad_build_info",
                              "rdmad version and data transport (always 1)");
    AddSample(info, {{"transport", std::string(core::TransportKindName(
                                       sources.transport))},
                     {"version", sources.version}},
              1);
    families.push_back(std::move(info));
    if (!sources.devices.empty()) {
      MetricFamily dmabuf = Gauge(
          "rdmad_device_dmabuf",
          "1 if the RDMA device registers dma-bufs (GPU memory), as probed "
          "at start");
      for (const core::DeviceInfo& device : sources.devices) {
        AddSample(dmabuf, {{"device", device.name}, {"driver", device.driver}},
                  device.dmabuf ? 1 : 0);
      }
      families.push_back(std::move(dmabuf));
    }
    if (const directory::ClusterDirectory* d =
            directory.load(std::memory_order_acquire)) {
      AddDirectory(d->state(), families);
    }
    if (const ring::QueueRegistry* q = queues.load(std::memory_order_acquire)) {
      AddQueues(q->Totals(), families);
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
      // Released first: whatever is handed over meanwhile only adds to the
      // second reading, so the difference is never negative.
      const core::RegionReleaser& releaser = sources.regions->releaser();
      const uint64_t released = releaser.released();
      const uint64_t handed_over = releaser.handed_over();
      MetricFamily off_loop = Counter(
          "rdmad_region_teardowns_off_loop_total",
          "Freed regions an event loop dropped last, torn down on "
          "rdmad-release instead");
      AddCount(off_loop, {}, static_cast<double>(handed_over));
      MetricFamily pending = Gauge(
          "rdmad_region_teardowns_pending",
          "Of those, the ones not torn down yet (their memory still held)");
      AddSample(pending, {}, static_cast<double>(handed_over - released));
      families.push_back(std::move(off_loop));
      families.push_back(std::move(pending));
    }
    if (sources.sessions != nullptr) {
      MetricFamily sessions = Gauge("rdmad_sessions", "Open client sessions");
      AddSample(sessions, {}, static_cast<double>(sources.sessions->size()));
      families.push_back(std::move(sessions));
    }
    if (sources.peers != nullptr) {
      std::map<std::string, int> peer_states;
      const std::vector<peer::PeerSnapshot> listed = sources.peers->ListPeers();
      for (const peer::PeerSnapshot& p : listed) {
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
      AddRails(listed, families);
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
      AddHandshakes(sources, families);
    }
    return families;
  }

  static void AddHandshakes(const MetricSources& sources,
                            std::vector<MetricFamily>& families) {
    MetricFamily now = Gauge("rdmad_handshakes",
                             "Handshakes with peers in flight and waiting "
                             "their turn, and the peaks of both");
    MetricFamily total = Counter(
        "rdmad_handshakes_total",
        "Handshakes admitted (of those, after waiting), and those told to "
        "retry: no room to wait (refused) or their deadline came first");
    auto add = [&](const std::string& role,
                   const peer::HandshakeAdmissionStats& s) {
      for (const auto& [state, n] :
           {std::pair<const char*, size_t>{"in_flight", s.in_flight},
            {"queued", s.queued},
            {"peak_in_flight", s.peak_in_flight},
            {"peak_queued", s.peak_queued}}) {
        AddSample(now, {{"role", role}, {"state", state}},
                  static_cast<double>(n));
      }
      for (const auto& [outcome, n] :
           {std::pair<const char*, uint64_t>{"admitted", s.admitted},
            {"waited", s.waited},
            {"refused", s.refused},
            {"expired", s.expired}}) {
        AddCount(total, {{"role", role}, {"outcome", outcome}},
                 static_cast<double>(n));
      }
    };
    add("initiator", sources.peers->handshake_stats());
    if (sources.handshakes_served != nullptr) {
      add("responder", sources.handshakes_served->stats());
    }
    families.push_back(std::move(now));
    families.push_back(std::move(total));
  }

  // The verbs channels' rails: per peer and rail (the local device), and
  // how many are in each state.
  static void AddRails(const std::vector<peer::PeerSnapshot>& peers,
                       std::vector<MetricFamily>& families) {
    MetricFamily bytes = Counter("rdmad_rail_bytes_total",
                                 "Bytes moved on each rail to each peer");
    MetricFamily ops = Counter(
        "rdmad_rail_operations_total",
        "Operations, or pieces of split ones, completed on each rail");
    MetricFamily errors = Counter("rdmad_rail_errors_total",
                                  "Operations or pieces that failed on each "
                                  "rail (a failed rail's are re-issued)");
    MetricFamily pauses = Counter("rdmad_rail_pauses_total",
                                  "Times each rail was paused after its QPs "
                                  "or its port failed");
    MetricFamily bandwidth =
        Gauge("rdmad_rail_bandwidth_bytes_per_second",
              "Each rail's measured completion bandwidth (EWMA)");
    std::map<std::string, int> states;
    for (const peer::PeerSnapshot& p : peers) {
      for (const transport::RailInfo& r : p.rails) {
        const std::vector<ClientMetric::Label> labels = {{"peer", p.address},
                                                         {"rail", r.device}};
        AddCount(bytes, labels, static_cast<double>(r.bytes));
        AddCount(ops, labels, static_cast<double>(r.ops));
        AddCount(errors, labels, static_cast<double>(r.errors));
        AddCount(pauses, labels, static_cast<double>(r.pauses));
        AddSample(bandwidth, labels, r.bandwidth);
        ++states[std::string(transport::RailStatusName(r.state))];
      }
    }
    MetricFamily rails = Gauge("rdmad_rails", "Rails to peers by state");
    for (const auto& [state, n] : states) AddSample(rails, {{"state", state}}, n);
    for (MetricFamily* f : {&bytes, &ops, &errors, &pauses, &bandwidth, &rails}) {
      families.push_back(std::move(*f));
    }
  }

  static void AddQueues(const ring::QueueTotals& t,
                        std::vector<MetricFamily>& families) {
    MetricFamily queues =
        Gauge("rdmad_queues", "Clients' shared-memory queues by state");
    AddSample(queues, {{"state", "running"}}, static_cast<double>(t.running));
    AddSample(queues, {{"state", "stopped"}}, static_cast<double>(t.stopped));
    families.push_back(std::move(queues));
    auto counter = [&families](const char* name, const char* help,
                               std::vector<std::pair<std::string, uint64_t>>
                                   samples,
                               const char* label) {
      MetricFamily family = Gauge(name, help);
      family.type = MetricType::Counter;
      for (const auto& [value, n] : samples) {
        ClientMetric m;
        if (label != nullptr) m.label = {{label, value}};
        m.counter.value = static_cast<double>(n);
        family.metric.push_back(std::move(m));
      }
      families.push_back(std::move(family));
    };
    counter("rdmad_queue_client_wakeups_total",
            "Completions that woke a client asleep on its queue",
            {{"", t.client_wakeups}}, nullptr);
    counter("rdmad_queue_doorbells_total",
            "Client doorbells that woke a sleeping engine",
            {{"", t.doorbells}}, nullptr);
    counter("rdmad_notifications_total",
            "Notifications of writes with an immediate, by result (lost: "
            "past the owner uid's notification_backlog, or its session "
            "ended before it opened a notification queue)",
            {{"delivered", t.notifications_delivered},
             {"lost", t.notifications_lost}},
            "result");
    MetricFamily held =
        Gauge("rdmad_notifications_held",
              "Notifications the daemon holds for their owners: notification "
              "queues without room to spare, owners without one open");
    AddSample(held, {}, static_cast<double>(t.notifications_held));
    families.push_back(std::move(held));
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
          d.state == directory::DirectoryLink::kConnected ? 1 : 0);
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

  const MetricSources sources;
  std::atomic<const directory::ClusterDirectory*> directory{nullptr};
  std::atomic<const ring::QueueRegistry*> queues{nullptr};
  TransferStats transfers;
};

DaemonMetrics::DaemonMetrics(MetricSources sources)
    : state_(std::make_shared<State>(std::move(sources))) {}

DaemonMetrics::~DaemonMetrics() = default;

void DaemonMetrics::OnTransferDone(const core::TransferRecord& record) {
  state_->transfers.Record(record);
}

void DaemonMetrics::SetQueues(const ring::QueueRegistry* queues) {
  state_->queues.store(queues, std::memory_order_release);
}

void DaemonMetrics::SetDirectory(
    const directory::ClusterDirectory* directory) {
  state_->directory.store(directory, std::memory_order_release);
}

std::shared_ptr<prometheus::Collectable> DaemonMetrics::collectable() const {
  return state_;
}

}  // namespace rdmad::metrics
