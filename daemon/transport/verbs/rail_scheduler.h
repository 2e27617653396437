// RailScheduler: which rails carry an operation to one peer, and how much of
// it each carries.
//
// A rail is a local RDMA port paired with one of the peer's, with its own
// pool of RC QPs (rail_channel.h). The scheduler knows nothing of verbs: per
// rail it keeps a state, the bytes outstanding on it, an exponentially
// weighted moving average (EWMA) of the bandwidth its completions showed,
// and counters, and it answers two questions:
//   - an operation up to `stripe_threshold` (PickWhole): the rail with the
//     fewest outstanding bytes takes it whole, so that a small operation
//     costs the latency of one rail;
//   - a larger one (Split): page-aligned chunks of at least `min_chunk`,
//     spread over the rails in proportion to their bandwidth EWMAs; a rail
//     whose EWMA has not been refreshed for `probe_interval` gets at least
//     one chunk (the occasional probe: a rail that once measured slow is
//     measured again instead of starving).
//
// States of a rail:
//
//            Pause (QPs failed, port down)
//   kActive ───────────────────────────────▶ kPaused ──(pause over,
//     ▲   ▲                                    ▲  │     port ACTIVE: Resume)
//     │   └──── its probe completed ──── kProbing ◀┘
//     │                                    │
//     └────────────────────────────────────┘ (probe failed: Pause again)
//
// A pause lasts pause_min; a rail that fails again within pause_max of
// coming back is paused for twice its last pause, up to pause_max (so a
// flapping link costs one reconnection per pause, never a storm). A PROBING
// rail carries at most one operation or chunk at a time until one succeeds.
//
// The scheduler outlives the channels of its peer (a rebuilt channel picks
// up where the last one left: pauses, EWMAs, counters). Not thread-safe:
// the owner locks around it (PeerRails). Times are passed in, so tests
// drive it with a fake clock.
//
// Example:
//   RailScheduler rails(RailSchedulerOptions{}, 2);
//   if (length <= rails.options().stripe_threshold) {
//     auto rail = rails.PickWhole(kAllRails);  // Posted(*rail, length, now)
//   } else {
//     for (const RailSlice& s : rails.Split(length, kAllRails, now)) ...
//   }
//   ... rails.Completed(rail, bytes, now), or Failed + Pause.
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_RAIL_SCHEDULER_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_RAIL_SCHEDULER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/transport/rail_counters.h"

namespace rdmad::verbs {

enum class RailState : uint8_t { kActive, kProbing, kPaused };

// "ACTIVE", "PROBING", "PAUSED".
absl::string_view RailStateName(RailState state);

// A set of rails: bit i is rail i.
using RailSet = uint64_t;
inline constexpr size_t kMaxRails = 64;
inline constexpr RailSet kAllRails = ~RailSet{0};
inline constexpr RailSet RailBit(size_t rail) { return RailSet{1} << rail; }

struct RailSchedulerOptions {
  // Operations up to this many bytes go whole to one rail.
  uint64_t stripe_threshold = 64 << 10;
  // Chunks of a split operation: at least min_chunk, at most max_chunk,
  // multiples of `page`, about chunks_per_rail per rail.
  uint64_t min_chunk = 64 << 10;
  uint64_t max_chunk = 4 << 20;
  uint64_t page = 4096;
  uint32_t chunks_per_rail = 4;
  // Weight of a new bandwidth sample in the EWMA.
  double ewma_weight = 0.25;
  // A sample is the bytes a busy rail completed over at least this long
  // (or until it fell idle), and at least min_chunk of them.
  absl::Duration sample_period = absl::Milliseconds(100);
  // A rail with no bandwidth sample for this long gets a chunk of the next
  // split operation whatever its EWMA says.
  absl::Duration probe_interval = absl::Seconds(1);
  // First pause of a failed rail, and the longest one.
  absl::Duration pause_min = absl::Seconds(30);
  absl::Duration pause_max = absl::Seconds(300);
};

// Bytes [offset, offset + length) of an operation go on `rail`.
struct RailSlice {
  size_t rail = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// What a rail did so far, and its state, for inspection.
struct RailStats : transport::RailCounters {
  RailState state = RailState::kActive;
};

class RailScheduler {
 public:
  // `rails` is at most kMaxRails.
  RailScheduler(RailSchedulerOptions options, size_t rails);

  size_t size() const { return rails_.size(); }
  const RailSchedulerOptions& options() const { return options_; }

  // The rails of `candidates` that may take new work now: ACTIVE ones, and
  // PROBING ones whose probe is not in flight.
  RailSet Eligible(RailSet candidates) const;

  // The rail for a whole operation: of the ACTIVE rails in `candidates`,
  // the one with the fewest outstanding bytes (ties: the higher bandwidth,
  // then in turn); when none is ACTIVE, an eligible PROBING one (the
  // operation is its probe). nullopt when no rail of `candidates` is
  // eligible.
  std::optional<size_t> PickWhole(RailSet candidates);

  // Splits an operation of `length` bytes over the eligible rails of
  // `candidates` (see the header comment), in offset order. A PROBING rail
  // gets exactly one chunk. Empty when no rail is eligible.
  std::vector<RailSlice> Split(uint64_t length, RailSet candidates,
                               absl::Time now);

  // `bytes` were posted on `rail` at `now` (a PROBING rail's probe is then
  // in flight).
  void Posted(size_t rail, uint64_t bytes, absl::Time now);
  // They completed at `now`: counts them, feeds the EWMA, and a PROBING
  // rail is ACTIVE again. A sample is the bytes a busy rail completed since
  // the last sample (or since it fell busy), up to the completion before
  // the first one at least sample_period on; or, when the rail falls idle,
  // up to now. Completions polled together arrive microseconds apart: a
  // window they end shorter than sample_period is merged into the sample
  // before it instead of looking like a burst at line rate. Windows of
  // less than min_chunk bytes measure latency, not bandwidth: dropped.
  void Completed(size_t rail, uint64_t bytes, absl::Time now);
  // They failed (an error is counted; whether the rail is to blame is the
  // caller's call: Pause).
  void Failed(size_t rail, uint64_t bytes);

  // The rail failed (its QPs, its port): PAUSED from `now` (see the header
  // comment for how long). False when it already was; true when this is a
  // change (to be logged once).
  bool Pause(size_t rail, absl::Time now, std::string why);
  // A PAUSED rail whose pause is over becomes PROBING; `early`: even
  // before (when no other rail is left). False when it was not paused or
  // its pause is not over.
  bool Resume(size_t rail, absl::Time now, bool early = false);
  // The rail's pause is over (or it is not paused) and its port is ACTIVE.
  bool PauseOver(size_t rail, absl::Time now) const;

  void SetPortActive(size_t rail, bool active);
  bool port_active(size_t rail) const { return rails_[rail].port_active; }
  RailState state(size_t rail) const { return rails_[rail].state; }
  uint64_t outstanding(size_t rail) const { return rails_[rail].outstanding; }

  RailStats Stats(size_t rail, absl::Time now) const;

 private:
  struct Rail {
    RailState state = RailState::kActive;
    bool port_active = true;
    bool probe_in_flight = false;
    uint64_t outstanding = 0;
    double bandwidth = 0;  // bytes/s; 0 = never measured
    absl::Time last_sample = absl::InfinitePast();
    // The sample being gathered: since window_start (the rail fell busy,
    // or the last sample), window_bytes completed, the last at
    // last_completion.
    absl::Time window_start = absl::InfinitePast();
    absl::Time last_completion = absl::InfinitePast();
    uint64_t window_bytes = 0;
    // The last sample, to merge a short window ending a burst into it.
    absl::Time sample_start = absl::InfinitePast();
    absl::Time sample_end = absl::InfinitePast();
    uint64_t sample_bytes = 0;
    double bandwidth_before = 0;  // the EWMA before the last sample
    absl::Duration pause = absl::ZeroDuration();  // the last one
    absl::Time paused_until = absl::InfinitePast();
    absl::Time resumed_at = absl::InfinitePast();
    uint64_t bytes = 0, ops = 0, errors = 0, pauses = 0;
    std::string last_error;
  };

  // The weight a split gives an ACTIVE rail: its EWMA, else the mean of
  // the measured ones, else 1.
  double Weight(size_t rail, double fallback) const;
  // Feeds the EWMA with `bytes` over [from, to) and opens the next window.
  void Sample(Rail& r, uint64_t bytes, absl::Time from, absl::Time to);

  const RailSchedulerOptions options_;
  std::vector<Rail> rails_;
  size_t next_ = 0;  // where ties start, so that they take turns
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_RAIL_SCHEDULER_H_
