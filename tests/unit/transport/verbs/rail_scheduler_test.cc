// RailScheduler (daemon/transport/verbs/rail_scheduler.h): the small-op
// rule, the proportional split, the EWMA, the probes, pause and resume, on a
// fake clock.
#include "daemon/transport/verbs/rail_scheduler.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/sizes.h"

namespace rdmad::verbs {
namespace {

using ::rdmad::testing::kKiB;
using ::rdmad::testing::kMiB;

const absl::Time kT0 = absl::FromUnixSeconds(1000000);

// Bytes each rail carries in `slices`, checking that they cover
// [0, length) in order with page-aligned chunks of at least 64 KiB (the
// last one may be shorter).
std::vector<uint64_t> BytesPerRail(const std::vector<RailSlice>& slices,
                                   uint64_t length, size_t rails) {
  std::vector<uint64_t> bytes(rails, 0);
  uint64_t offset = 0;
  for (size_t i = 0; i < slices.size(); ++i) {
    const RailSlice& s = slices[i];
    EXPECT_EQ(s.offset, offset) << "slice " << i;
    EXPECT_EQ(s.offset % 4096, 0u) << "slice " << i;
    if (i + 1 < slices.size()) {
      EXPECT_GE(s.length, 64 * kKiB) << "slice " << i;
    }
    bytes[s.rail] += s.length;
    offset += s.length;
  }
  EXPECT_EQ(offset, length);
  return bytes;
}

// Gives `rail` a bandwidth of about `bytes_per_second` with one chunk.
void Measure(RailScheduler& rails, size_t rail, double bytes_per_second,
             absl::Time at) {
  const uint64_t bytes = 1 * kMiB;
  const absl::Duration took =
      absl::Seconds(static_cast<double>(bytes) / bytes_per_second);
  rails.Posted(rail, bytes, at - took);
  rails.Completed(rail, bytes, at);
}

TEST(RailSchedulerTest, SmallOperationGoesWholeToTheLeastLoadedRail) {
  RailScheduler rails(RailSchedulerOptions{}, 3);
  rails.Posted(0, 1 * kMiB, kT0);
  rails.Posted(2, 64 * kKiB, kT0);
  EXPECT_EQ(rails.PickWhole(kAllRails), 1u);
  rails.Posted(1, 2 * kMiB, kT0);
  EXPECT_EQ(rails.PickWhole(kAllRails), 2u);
  // Only the candidates count: a pinned or NUMA-near set.
  EXPECT_EQ(rails.PickWhole(RailBit(0) | RailBit(1)), 0u);
  rails.Completed(1, 2 * kMiB, kT0 + absl::Milliseconds(1));
  rails.Completed(0, 1 * kMiB, kT0 + absl::Milliseconds(1));
  rails.Completed(2, 64 * kKiB, kT0 + absl::Milliseconds(1));
  EXPECT_EQ(rails.outstanding(0), 0u);
  EXPECT_EQ(rails.PickWhole(0), std::nullopt) << "no candidate";
}

TEST(RailSchedulerTest, IdleRailsTakeSmallOperationsInTurn) {
  RailScheduler rails(RailSchedulerOptions{}, 2);
  std::vector<size_t> picked;
  for (int i = 0; i < 4; ++i) picked.push_back(*rails.PickWhole(kAllRails));
  EXPECT_THAT(picked, ::testing::ElementsAre(0, 1, 0, 1));
}

TEST(RailSchedulerTest, SplitFollowsTheMeasuredBandwidths) {
  RailScheduler rails(RailSchedulerOptions{}, 2);
  Measure(rails, 0, 100e6, kT0);
  Measure(rails, 1, 300e6, kT0);
  const uint64_t length = 64 * kMiB;
  const auto slices = rails.Split(length, kAllRails, kT0);
  const auto bytes = BytesPerRail(slices, length, 2);
  // 1:3, to within a chunk (4 MiB at most).
  EXPECT_NEAR(static_cast<double>(bytes[1]) / static_cast<double>(length),
              0.75, 4.0 * kMiB / length);
  EXPECT_GT(bytes[0], 0u);
}

TEST(RailSchedulerTest, UnmeasuredRailsShareEquallyInPageAlignedChunks) {
  RailScheduler rails(RailSchedulerOptions{}, 2);
  for (uint64_t length : {65 * kKiB, 1 * kMiB, 16 * kMiB + 7}) {
    SCOPED_TRACE(length);
    const auto slices = rails.Split(length, kAllRails, kT0);
    const auto bytes = BytesPerRail(slices, length, 2);
    EXPECT_GT(bytes[0], 0u);
    EXPECT_GT(bytes[1], 0u);
  }
  // 1 MiB over two rails: four chunks of 128 KiB each.
  const auto slices = rails.Split(1 * kMiB, kAllRails, kT0);
  ASSERT_EQ(slices.size(), 8u);
  EXPECT_EQ(slices[0].length, 128 * kKiB);
  // Chunks never exceed max_chunk.
  for (const RailSlice& s : rails.Split(1024 * kMiB, kAllRails, kT0)) {
    EXPECT_LE(s.length, 4 * kMiB);
  }
}

TEST(RailSchedulerTest, EwmaWeighsEachNewSampleByAQuarter) {
  RailScheduler rails(RailSchedulerOptions{}, 1);  // samples of 100 ms
  const uint64_t chunk = 1 * kMiB;
  const auto bandwidth = [&] { return rails.Stats(0, kT0).bandwidth; };
  // Busy from posting to falling idle: 1 MiB in 10 ms.
  rails.Posted(0, chunk, kT0);
  rails.Completed(0, chunk, kT0 + absl::Milliseconds(10));
  double expected = 100.0 * kMiB;
  EXPECT_NEAR(bandwidth(), expected, 1);
  // Two chunks posted together, done after 5 and 10 ms: one sample.
  absl::Time t = kT0 + absl::Seconds(1);
  rails.Posted(0, 2 * chunk, t);
  rails.Completed(0, chunk, t + absl::Milliseconds(5));
  EXPECT_NEAR(bandwidth(), expected, 1) << "busy still: no sample yet";
  rails.Completed(0, chunk, t + absl::Milliseconds(10));
  expected = 0.25 * 200.0 * kMiB + 0.75 * expected;
  EXPECT_NEAR(bandwidth(), expected, 1);
  // Four chunks whose completions are polled together after 200 ms,
  // microseconds apart: 4 MiB in 200 ms, not 1 MiB in 200 ms and then 3 MiB
  // in no time.
  t += absl::Seconds(1);
  rails.Posted(0, 4 * chunk, t);
  for (int us : {0, 3, 6, 9}) {
    rails.Completed(0, chunk, t + absl::Milliseconds(200) + absl::Microseconds(us));
  }
  expected = 0.25 * (4.0 * kMiB / 0.200009) + 0.75 * expected;
  EXPECT_NEAR(bandwidth(), expected, 1);
  // Under steady load a window closes at the completion before the first
  // one past sample_period: 3 MiB over 120 ms; the fourth opens the next.
  t += absl::Seconds(1);
  rails.Posted(0, 8 * chunk, t);
  for (int ms : {40, 80, 120}) {
    rails.Completed(0, chunk, t + absl::Milliseconds(ms));
  }
  EXPECT_NEAR(bandwidth(), expected, 1) << "no sample yet";
  rails.Completed(0, chunk, t + absl::Milliseconds(160));
  expected = 0.25 * (3.0 * kMiB / 0.120) + 0.75 * expected;
  EXPECT_NEAR(bandwidth(), expected, 1);
  // Small operations measure latency, not bandwidth: they leave it.
  rails.Failed(0, 4 * chunk);
  t += absl::Seconds(1);
  rails.Posted(0, 8, t);
  rails.Completed(0, 8, t + absl::Seconds(1));
  EXPECT_NEAR(bandwidth(), expected, 1);
  EXPECT_EQ(rails.Stats(0, t).ops, 12u);
  EXPECT_EQ(rails.Stats(0, t).bytes, 11 * chunk + 8);
}

TEST(RailSchedulerTest, ARailNotMeasuredForAWhileGetsAProbeChunk) {
  RailSchedulerOptions options;
  options.probe_interval = absl::Seconds(1);
  RailScheduler rails(options, 2);
  Measure(rails, 0, 1e9, kT0);
  Measure(rails, 1, 1e3, kT0);  // measured very slow once
  const uint64_t length = 16 * kMiB;
  // Just measured: its share rounds to nothing.
  EXPECT_EQ(BytesPerRail(rails.Split(length, kAllRails, kT0), length, 2)[1],
            0u);
  // A while later it gets one chunk, to be measured again.
  const auto later = BytesPerRail(
      rails.Split(length, kAllRails, kT0 + absl::Seconds(2)), length, 2);
  EXPECT_GT(later[1], 0u);
  EXPECT_LE(later[1], 4 * kMiB);
}

TEST(RailSchedulerTest, PausesDoubleWhileTheRailKeepsFailing) {
  RailSchedulerOptions options;
  options.pause_min = absl::Seconds(30);
  options.pause_max = absl::Seconds(300);
  RailScheduler rails(options, 2);
  absl::Time now = kT0;
  ASSERT_TRUE(rails.Pause(1, now, "retry exceeded"));
  EXPECT_FALSE(rails.Pause(1, now, "again")) << "already paused";
  EXPECT_EQ(rails.state(1), RailState::kPaused);
  EXPECT_EQ(rails.Eligible(kAllRails), RailBit(0));
  EXPECT_EQ(rails.PickWhole(kAllRails), 0u);
  EXPECT_EQ(rails.Stats(1, now).paused_left, absl::Seconds(30));
  EXPECT_EQ(rails.Stats(1, now).last_error, "retry exceeded");

  std::vector<absl::Duration> pauses;
  for (int i = 0; i < 5; ++i) {
    const absl::Duration pause = rails.Stats(1, now).paused_left;
    pauses.push_back(pause);
    EXPECT_FALSE(rails.Resume(1, now + pause - absl::Seconds(1)));
    EXPECT_FALSE(rails.PauseOver(1, now + pause - absl::Seconds(1)));
    now += pause;
    EXPECT_TRUE(rails.PauseOver(1, now));
    ASSERT_TRUE(rails.Resume(1, now));
    EXPECT_EQ(rails.state(1), RailState::kProbing);
    // It fails its probe: a longer pause.
    now += absl::Seconds(1);
    ASSERT_TRUE(rails.Pause(1, now, "probe failed"));
  }
  EXPECT_THAT(pauses, ::testing::ElementsAre(
                          absl::Seconds(30), absl::Seconds(60),
                          absl::Seconds(120), absl::Seconds(240),
                          absl::Seconds(300)));
  EXPECT_EQ(rails.Stats(1, now).paused_left, absl::Seconds(300));
  EXPECT_EQ(rails.Stats(1, now).pauses, 6u);

  // Back, and healthy for longer than the longest pause: a new failure
  // starts from the first pause again.
  now += absl::Seconds(300);
  ASSERT_TRUE(rails.Resume(1, now));
  rails.Posted(1, 4096, now);
  rails.Completed(1, 4096, now + absl::Milliseconds(1));
  EXPECT_EQ(rails.state(1), RailState::kActive);
  now += absl::Seconds(301);
  ASSERT_TRUE(rails.Pause(1, now, "link down"));
  EXPECT_EQ(rails.Stats(1, now).paused_left, absl::Seconds(30));
}

TEST(RailSchedulerTest, APausedRailComesBackOnlyWithItsPortActive) {
  RailScheduler rails(RailSchedulerOptions{}, 2);
  ASSERT_TRUE(rails.Pause(0, kT0, "port down"));
  rails.SetPortActive(0, false);
  const absl::Time later = kT0 + absl::Seconds(60);
  EXPECT_FALSE(rails.PauseOver(0, later));
  rails.SetPortActive(0, true);
  EXPECT_TRUE(rails.PauseOver(0, later));
}

TEST(RailSchedulerTest, AProbingRailCarriesOneProbeAtATime) {
  RailScheduler rails(RailSchedulerOptions{}, 2);
  ASSERT_TRUE(rails.Pause(1, kT0, "retry exceeded"));
  const absl::Time now = kT0 + absl::Seconds(30);
  ASSERT_TRUE(rails.Resume(1, now));
  // Small operations stay on the ACTIVE rail.
  EXPECT_EQ(rails.PickWhole(kAllRails), 0u);
  EXPECT_EQ(rails.PickWhole(kAllRails), 0u);
  // A split gives the returning rail one chunk, its probe.
  const uint64_t length = 16 * kMiB;
  const auto slices = rails.Split(length, kAllRails, now);
  const auto bytes = BytesPerRail(slices, length, 2);
  ASSERT_EQ(slices.front().rail, 1u);
  EXPECT_EQ(bytes[1], slices.front().length);
  EXPECT_NE(slices.back().rail, 1u) << "the last piece goes to an ACTIVE rail";
  rails.Posted(1, slices.front().length, now);
  // Its probe in flight: nothing more for it until it completed.
  EXPECT_EQ(rails.Eligible(kAllRails), RailBit(0));
  rails.Completed(1, slices.front().length, now + absl::Seconds(1));
  EXPECT_EQ(rails.state(1), RailState::kActive);
  EXPECT_EQ(rails.Eligible(kAllRails), RailBit(0) | RailBit(1));
}

TEST(RailSchedulerTest, WithoutAnActiveRailProbingRailsCarryEverything) {
  RailScheduler rails(RailSchedulerOptions{}, 1);
  ASSERT_TRUE(rails.Pause(0, kT0, "retry exceeded"));
  EXPECT_EQ(rails.PickWhole(kAllRails), std::nullopt);
  EXPECT_TRUE(rails.Split(1 * kMiB, kAllRails, kT0).empty());
  ASSERT_TRUE(rails.Resume(0, kT0 + absl::Seconds(30)));
  rails.Posted(0, 4096, kT0);
  // One rail, its probe in flight: the next operation still goes there.
  EXPECT_EQ(rails.PickWhole(kAllRails), 0u);
  const uint64_t length = 1 * kMiB;
  EXPECT_EQ(BytesPerRail(rails.Split(length, kAllRails, kT0), length, 1)[0],
            length);
}

TEST(RailSchedulerTest, StateNames) {
  EXPECT_EQ(RailStateName(RailState::kActive), "ACTIVE");
  EXPECT_EQ(RailStateName(RailState::kProbing), "PROBING");
  EXPECT_EQ(RailStateName(RailState::kPaused), "PAUSED");
}

}  // namespace
}  // namespace rdmad::verbs
