// DaemonMetrics: rdmad's Prometheus metrics.
//
// Counters and histograms of transfers are fed by the TransferEngine (as its
// core::TransferObserver), counted per thread and summed at scrape time
// (transfer_stats.h: a Prometheus family update per operation was a
// seventh of the daemon's CPU on small operations); gauges of regions,
// sessions, peers and QPs are read from the core's tables at scrape time, so
// nothing has to keep them in step. Exposed over HTTP by MetricsServer.
//
//   rdmad_transfer_bytes_total{peer,op,transport}       bytes moved
//   rdmad_transfer_operations_total{peer,op,transport}  transfers completed
//   rdmad_transfer_errors_total{peer,op,kind}           failed, by status code
//   rdmad_transfer_latency_seconds{op,transport}        histogram
//   rdmad_qps{transport,state}                          QPs / TCP connections
//   rdmad_rail_bytes_total{peer,rail}, rdmad_rail_operations_total,
//   rdmad_rail_errors_total, rdmad_rail_pauses_total    per verbs rail
//   rdmad_rail_bandwidth_bytes_per_second{peer,rail}    its measured EWMA
//   rdmad_rails{state}                                  ACTIVE, PAUSED...
//   rdmad_peers{state}                                  remote daemons
//   rdmad_handshakes{role,state}                        handshakes with
//                                                       peers: in_flight,
//                                                       queued, their peaks
//   rdmad_handshakes_total{role,outcome}                admitted, waited,
//                                                       refused, expired
//   rdmad_regions, rdmad_region_bytes, rdmad_pinned_bytes, rdmad_sessions
//   rdmad_queues{state}                                 clients' queues:
//                                                       running, stopped
//   rdmad_queue_client_wakeups_total                    completions that
//                                                       woke a sleeping client
//   rdmad_queue_doorbells_total                         doorbells that woke
//                                                       an engine
//   rdmad_notifications_total{result}                   delivered, lost
//   rdmad_notifications_held                            held for their owners
//   rdmad_build_info{version,transport}                 always 1
//   rdmad_device_dmabuf{device,driver}                  1 if the RDMA device
//                                                       registers dma-bufs
//   rdmad_directory_connected                           1 if etcd is reached
//   rdmad_directory_published_regions, _cached_regions, _conflicts
//   rdmad_directory_reconnects_total                    new etcd sessions
//   rdmad_directory_lookups_total{source}               cache, etcd, failed
//
// `peer` is the remote daemon's HOST:PORT (also when the region was named
// by a descriptor), or "local" for a transfer within this daemon. On
// completed transfers its cardinality is the number of peers, bounded by
// the cluster size; failed transfers may name any address a client typed,
// so their distinct peers are capped (256, then "other").
//
// Thread-safe.
#ifndef RDMAD_DAEMON_METRICS_DAEMON_METRICS_H_
#define RDMAD_DAEMON_METRICS_DAEMON_METRICS_H_

#include <memory>
#include <string>
#include <vector>

#include "daemon/core/device_info.h"
#include "daemon/core/region_table.h"
#include "daemon/core/session_table.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/core/transfer_observer.h"
#include "daemon/directory/cluster_directory.h"
#include "daemon/peer/peer_table.h"
#include "daemon/ring/queue_registry.h"

namespace prometheus {
class Collectable;
}  // namespace prometheus

namespace rdmad::metrics {

// What the gauges are read from. Not owned; each must outlive the
// DaemonMetrics (any may be null: that gauge is then left out).
struct MetricSources {
  core::RegionTable* regions = nullptr;
  core::SessionTable* sessions = nullptr;
  peer::PeerTable* peers = nullptr;
  // The handshakes this daemon serves (the initiator's come from `peers`).
  const peer::HandshakeAdmission* handshakes_served = nullptr;
  std::string version;
  core::TransportKind transport = core::TransportKind::kTcp;  // this daemon's
  // The RDMA devices in use, with their dma-buf probe; empty on TCP.
  std::vector<core::DeviceInfo> devices;
};

class DaemonMetrics final : public core::TransferObserver {
 public:
  explicit DaemonMetrics(MetricSources sources);
  ~DaemonMetrics() override;

  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  // core::TransferObserver.
  void OnTransferDone(const core::TransferRecord& record) override;

  // Adds the cluster directory's gauges (not owned; null: none). Set it
  // before the first scrape; it must outlive the DaemonMetrics.
  void SetDirectory(const directory::ClusterDirectory* directory);
  // Adds the clients' queues (not owned; null: none), likewise.
  void SetQueues(const ring::QueueRegistry* queues);

  // Everything to expose: the registry of counters plus the scrape-time
  // gauges. Shared so an exposer can hold it weakly.
  std::shared_ptr<prometheus::Collectable> collectable() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace rdmad::metrics

#endif  // RDMAD_DAEMON_METRICS_DAEMON_METRICS_H_
