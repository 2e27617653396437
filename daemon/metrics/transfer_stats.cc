#include "daemon/metrics/transfer_stats.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace rdmad::metrics {

// Outside the anonymous namespace: TransferStats::Shard, a class with
// linkage, holds a map that uses it.
struct SeriesKeyHash {
  size_t operator()(const TransferStats::SeriesKey& k) const {
    return absl::HashOf(k.peer, k.op, k.transport);
  }
};

namespace {

absl::string_view PeerOf(const core::TransferRecord& record) {
  return record.peer == nullptr || record.peer->empty()
             ? absl::string_view("local")
             : absl::string_view(*record.peer);
}

// Which shard the calling thread counts in: fixed per thread, handed out
// round-robin so that the few busy threads (engine and I/O loops, started
// together) get shards of their own.
size_t ShardOfThisThread() {
  static std::atomic<size_t> next{0};
  thread_local const size_t index =
      next.fetch_add(1, std::memory_order_relaxed) % TransferStats::kShards;
  return index;
}

size_t BucketOf(double seconds) {
  // The first bound at or above the value ("le"), as Prometheus counts.
  return static_cast<size_t>(
      std::lower_bound(kLatencyBuckets.begin(), kLatencyBuckets.end(),
                       seconds) -
      kLatencyBuckets.begin());
}

}  // namespace

// One thread's counts (or a few threads', taking turns). On a cache line
// of its own so that threads counting at once do not share one.
struct alignas(64) TransferStats::Shard {
  mutable absl::Mutex mu;
  // Node-based: `last` points into it and stays valid as it grows.
  absl::node_hash_map<SeriesKey, Series, SeriesKeyHash> series
      ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<ErrorKey, uint64_t> errors ABSL_GUARDED_BY(mu);
  // The series counted last: a thread mostly counts the same one again.
  std::pair<const SeriesKey, Series>* last ABSL_GUARDED_BY(mu) = nullptr;
};

TransferStats::TransferStats() : shards_(new Shard[kShards]) {}

TransferStats::~TransferStats() = default;

std::string TransferStats::ErrorPeerLabel(absl::string_view peer) {
  absl::MutexLock lock(&error_peers_mu_);
  if (error_peers_.contains(peer)) return std::string(peer);
  if (error_peers_.size() >= kMaxErrorPeers) return "other";
  error_peers_.insert(std::string(peer));
  return std::string(peer);
}

void TransferStats::Record(const core::TransferRecord& record) {
  if (record.code != absl::StatusCode::kOk) {
    ErrorKey key{ErrorPeerLabel(PeerOf(record)), record.op, record.code};
    Shard& shard = shards_[ShardOfThisThread()];
    absl::MutexLock lock(&shard.mu);
    ++shard.errors[key];
    return;
  }
  Shard& shard = shards_[ShardOfThisThread()];
  absl::MutexLock lock(&shard.mu);
  const absl::string_view peer = PeerOf(record);
  auto* entry = shard.last;
  if (entry == nullptr || entry->first.op != record.op ||
      entry->first.transport != record.transport ||
      entry->first.peer != peer) {
    entry = &*shard.series
                  .try_emplace(SeriesKey{std::string(peer), record.op,
                                         record.transport})
                  .first;
    shard.last = entry;
  }
  Series& s = entry->second;
  // Not absl::ToDoubleSeconds: its exact division (FDivDuration) was a
  // fortieth of a ring operation's daemon CPU. Nanoseconds are exact to
  // 292 years, and a double holds them to well under a nanosecond here.
  const double seconds =
      static_cast<double>(absl::ToInt64Nanoseconds(record.latency)) * 1e-9;
  ++s.operations;
  s.bytes += record.bytes;
  s.latency_sum += seconds;
  ++s.buckets[BucketOf(seconds)];
}

TransferStats::Totals TransferStats::Snapshot() const {
  Totals totals;
  for (size_t i = 0; i < kShards; ++i) {
    const Shard& shard = shards_[i];
    absl::MutexLock lock(&shard.mu);
    for (const auto& [key, s] : shard.series) {
      Series& sum = totals.series[key];
      sum.operations += s.operations;
      sum.bytes += s.bytes;
      sum.latency_sum += s.latency_sum;
      for (size_t b = 0; b < s.buckets.size(); ++b) {
        sum.buckets[b] += s.buckets[b];
      }
    }
    for (const auto& [key, n] : shard.errors) totals.errors[key] += n;
  }
  return totals;
}

}  // namespace rdmad::metrics
