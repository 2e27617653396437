// TransferStats: the per-transfer counters behind rdmad's transfer metrics,
// counted per thread and added up only when they are read (a scrape).
//
// Every finished transfer is counted (by the thread that finished it: an
// engine loop, an I/O loop, a gRPC thread). Updating a Prometheus family
// per operation costs a label map, its hash and a family-wide mutex, which
// took 14% of the daemon's CPU on small operations; here a thread adds to
// its own shard (a lock nobody else takes except a scrape, and a cached
// pointer to the series it used last), and Snapshot() sums the shards.
//
// Counters only grow: a thread's shard outlives the thread (shards belong
// to the TransferStats and are handed out to threads round-robin, so a
// shard may serve several threads over time; each update takes its lock).
//
// Example:
//   TransferStats stats;
//   stats.Record(record);              // any thread, per transfer
//   TransferStats::Totals t = stats.Snapshot();  // the scrape
//
// Thread-safe.
#ifndef RDMAD_DAEMON_METRICS_TRANSFER_STATS_H_
#define RDMAD_DAEMON_METRICS_TRANSFER_STATS_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/transfer.h"
#include "daemon/core/transfer_observer.h"

namespace rdmad::metrics {

// Upper bounds (seconds) of the latency histogram's buckets, ascending:
// 10 us .. 10 s, from a small verbs WRITE on one host to a large transfer
// over a congested link, with a factor of 2-2.5 between buckets. A last,
// unbounded bucket (+Inf) follows them.
inline constexpr std::array<double, 19> kLatencyBuckets = {
    10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3,  2.5e-3, 5e-3, 10e-3,
    25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0,   2.5,   5.0,    10.0};

class TransferStats {
 public:
  // Successful transfers of one (peer, op, transport).
  struct SeriesKey {
    std::string peer;  // HOST:PORT, or "local" within this daemon
    core::OpType op = core::OpType::kWrite;
    core::TransportKind transport = core::TransportKind::kNone;
    bool operator<(const SeriesKey& o) const {
      return std::tie(peer, op, transport) < std::tie(o.peer, o.op, o.transport);
    }
    bool operator==(const SeriesKey& o) const {
      return op == o.op && transport == o.transport && peer == o.peer;
    }
  };
  struct Series {
    uint64_t operations = 0;
    uint64_t bytes = 0;
    double latency_sum = 0;  // seconds
    // Not cumulative: bucket i counts latencies in (bound[i-1], bound[i]];
    // the last one those above every bound.
    std::array<uint64_t, kLatencyBuckets.size() + 1> buckets{};
  };
  // Failed transfers of one (peer, op, status code). Any address a client
  // types ends up as a peer here, reachable or not, so the distinct peers
  // are capped: past kMaxErrorPeers, new ones count as "other".
  using ErrorKey = std::tuple<std::string, core::OpType, absl::StatusCode>;
  static constexpr size_t kMaxErrorPeers = 256;

  // Everything counted so far, summed over the shards.
  struct Totals {
    std::map<SeriesKey, Series> series;
    std::map<ErrorKey, uint64_t> errors;
  };

  TransferStats();
  ~TransferStats();
  TransferStats(const TransferStats&) = delete;
  TransferStats& operator=(const TransferStats&) = delete;

  // Counts one finished transfer, in the calling thread's shard.
  void Record(const core::TransferRecord& record);
  Totals Snapshot() const;

  // Shards (a thread always uses the same one).
  static constexpr size_t kShards = 32;

 private:
  struct Shard;
  // The peer label of a failed transfer (see ErrorKey). Failures only.
  std::string ErrorPeerLabel(absl::string_view peer)
      ABSL_LOCKS_EXCLUDED(error_peers_mu_);

  std::unique_ptr<Shard[]> shards_;
  absl::Mutex error_peers_mu_;
  absl::flat_hash_set<std::string> error_peers_ ABSL_GUARDED_BY(error_peers_mu_);
};

}  // namespace rdmad::metrics

#endif  // RDMAD_DAEMON_METRICS_TRANSFER_STATS_H_
