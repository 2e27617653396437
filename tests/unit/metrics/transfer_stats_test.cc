// TransferStats: per-thread transfer counts that add up at a snapshot.
#include "daemon/metrics/transfer_stats.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace rdmad::metrics {
namespace {

using core::OpType;
using core::TransferRecord;
using core::TransportKind;

TransferRecord Ok(const std::string* peer, OpType op, TransportKind transport,
                  uint64_t bytes, absl::Duration latency) {
  TransferRecord r;
  r.op = op;
  r.peer = peer;
  r.transport = transport;
  r.bytes = bytes;
  r.latency = latency;
  return r;
}

TransferRecord Failed(OpType op, absl::StatusCode code) {
  TransferRecord r;
  r.op = op;
  r.code = code;
  return r;
}

TransferStats::SeriesKey Key(std::string peer, OpType op,
                             TransportKind transport) {
  return TransferStats::SeriesKey{std::move(peer), op, transport};
}

TEST(TransferStatsTest, CountsOfManyThreadsAddUpAtSnapshot) {
  TransferStats stats;
  const std::string a = "10.0.0.1:7471";
  const std::string b = "10.0.0.2:7471";
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        // Alternating series, so a thread's cached series keeps changing.
        stats.Record(Ok(i % 2 == 0 ? &a : &b, OpType::kWrite,
                        TransportKind::kTcp, 8, absl::Microseconds(20)));
        if (i % 100 == t) {
          stats.Record(Failed(OpType::kRead, absl::StatusCode::kNotFound));
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();

  const TransferStats::Totals totals = stats.Snapshot();
  ASSERT_EQ(totals.series.size(), 2u);
  for (const std::string* peer : {&a, &b}) {
    const auto it =
        totals.series.find(Key(*peer, OpType::kWrite, TransportKind::kTcp));
    ASSERT_NE(it, totals.series.end()) << *peer;
    const TransferStats::Series& s = it->second;
    EXPECT_EQ(s.operations, uint64_t{kThreads} * kPerThread / 2);
    EXPECT_EQ(s.bytes, 8 * s.operations);
    // 20 us lands in the 25 us bucket (the second), nowhere else.
    EXPECT_EQ(s.buckets[1], s.operations);
    uint64_t all = 0;
    for (uint64_t n : s.buckets) all += n;
    EXPECT_EQ(all, s.operations);
    EXPECT_NEAR(s.latency_sum, 20e-6 * static_cast<double>(s.operations),
                1e-6);
  }
  ASSERT_EQ(totals.errors.size(), 1u);
  EXPECT_EQ((totals.errors.at(
                {"local", OpType::kRead, absl::StatusCode::kNotFound})),
            uint64_t{kThreads} * kPerThread / 100);
}

// Failures carry their peer, and however many peers clients name, the
// distinct labels stay bounded: past the cap they are "other".
TEST(TransferStatsTest, ErrorPeersAreCapped) {
  TransferStats stats;
  std::vector<std::string> peers;
  for (size_t i = 0; i < TransferStats::kMaxErrorPeers + 50; ++i) {
    peers.push_back(absl::StrCat("10.0.", i / 256, ".", i % 256, ":7471"));
  }
  for (const std::string& peer : peers) {
    TransferRecord r = Failed(OpType::kWrite, absl::StatusCode::kUnavailable);
    r.peer = &peer;
    stats.Record(r);
  }
  const TransferStats::Totals totals = stats.Snapshot();
  EXPECT_EQ(totals.errors.size(), TransferStats::kMaxErrorPeers + 1);
  EXPECT_EQ(totals.errors.at(
                {"other", OpType::kWrite, absl::StatusCode::kUnavailable}),
            50u);
  EXPECT_EQ(totals.errors.at(
                {peers[0], OpType::kWrite, absl::StatusCode::kUnavailable}),
            1u);
}

TEST(TransferStatsTest, SnapshotsDuringUpdatesNeverGoBackwards) {
  TransferStats stats;
  const std::string peer = "p:1";
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop.load()) {
      stats.Record(Ok(&peer, OpType::kRead, TransportKind::kVerbs, 4096,
                      absl::Microseconds(5)));
    }
  });
  uint64_t last = 0;
  const auto key = Key(peer, OpType::kRead, TransportKind::kVerbs);
  // At least 200 snapshots, and on until the writer has counted some.
  for (int i = 0; i < 200 || last == 0; ++i) {
    const TransferStats::Totals totals = stats.Snapshot();
    const auto it = totals.series.find(key);
    const uint64_t now = it == totals.series.end() ? 0 : it->second.operations;
    EXPECT_GE(now, last);
    if (it != totals.series.end()) {
      EXPECT_EQ(it->second.bytes, 4096 * now);
      EXPECT_EQ(it->second.buckets[0], now);  // 5 us <= 10 us
    }
    last = now;
  }
  stop = true;
  writer.join();
  // Counted by a thread that has ended: still there.
  EXPECT_GE(stats.Snapshot().series.at(key).operations, last);
}

TEST(TransferStatsTest, LatencyBucketsAreUpperBoundsInclusive) {
  TransferStats stats;
  const std::string peer = "p:1";
  auto record = [&](absl::Duration latency) {
    stats.Record(
        Ok(&peer, OpType::kWrite, TransportKind::kTcp, 1, latency));
  };
  record(absl::Microseconds(10));      // == the first bound
  record(absl::Nanoseconds(10001));    // just above it
  record(absl::Seconds(10));           // == the last bound
  record(absl::Seconds(11));           // above every bound: +Inf
  const TransferStats::Series s =
      stats.Snapshot().series.at(Key(peer, OpType::kWrite, TransportKind::kTcp));
  EXPECT_EQ(s.buckets[0], 1u);
  EXPECT_EQ(s.buckets[1], 1u);
  EXPECT_EQ(s.buckets[kLatencyBuckets.size() - 1], 1u);
  EXPECT_EQ(s.buckets[kLatencyBuckets.size()], 1u);
  EXPECT_EQ(s.operations, 4u);
}

TEST(TransferStatsTest, NoPeerIsLocal) {
  TransferStats stats;
  const std::string empty;
  stats.Record(Ok(nullptr, OpType::kWrite, TransportKind::kLocal, 8,
                  absl::Microseconds(1)));
  stats.Record(Ok(&empty, OpType::kWrite, TransportKind::kLocal, 8,
                  absl::Microseconds(1)));
  const TransferStats::Totals totals = stats.Snapshot();
  ASSERT_EQ(totals.series.size(), 1u);
  EXPECT_EQ(totals.series.begin()->first.peer, "local");
  EXPECT_EQ(totals.series.begin()->second.operations, 2u);
}

}  // namespace
}  // namespace rdmad::metrics
