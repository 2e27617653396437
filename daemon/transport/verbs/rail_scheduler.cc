#include "daemon/transport/verbs/rail_scheduler.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace rdmad::verbs {
namespace {

uint64_t AlignUp(uint64_t value, uint64_t to) {
  return to <= 1 ? value : (value + to - 1) / to * to;
}

}  // namespace

absl::string_view RailStateName(RailState state) {
  switch (state) {
    case RailState::kActive:
      return "ACTIVE";
    case RailState::kProbing:
      return "PROBING";
    case RailState::kPaused:
      break;
  }
  return "PAUSED";
}

RailScheduler::RailScheduler(RailSchedulerOptions options, size_t rails)
    : options_(std::move(options)),
      rails_(std::min(rails, kMaxRails)) {}

RailSet RailScheduler::Eligible(RailSet candidates) const {
  RailSet active = 0;
  RailSet probing = 0;
  for (size_t i = 0; i < rails_.size(); ++i) {
    if ((candidates & RailBit(i)) == 0) continue;
    const Rail& r = rails_[i];
    if (r.state == RailState::kActive) active |= RailBit(i);
    if (r.state == RailState::kProbing) probing |= RailBit(i);
  }
  // While another rail carries the traffic, a returning rail takes one
  // probe at a time; without one, it is all there is.
  if (active == 0) return probing;
  for (size_t i = 0; i < rails_.size(); ++i) {
    if ((probing & RailBit(i)) != 0 && !rails_[i].probe_in_flight) {
      active |= RailBit(i);
    }
  }
  return active;
}

std::optional<size_t> RailScheduler::PickWhole(RailSet candidates) {
  const RailSet eligible = Eligible(candidates);
  if (eligible == 0) return std::nullopt;
  // ACTIVE rails first: a small operation is no probe when it can help it.
  RailSet pool = 0;
  for (size_t i = 0; i < rails_.size(); ++i) {
    if ((eligible & RailBit(i)) != 0 && rails_[i].state == RailState::kActive) {
      pool |= RailBit(i);
    }
  }
  if (pool == 0) pool = eligible;
  std::optional<size_t> best;
  for (size_t k = 0; k < rails_.size(); ++k) {
    const size_t i = (next_ + k) % rails_.size();
    if ((pool & RailBit(i)) == 0) continue;
    if (!best.has_value()) {
      best = i;
      continue;
    }
    const Rail& r = rails_[i];
    const Rail& b = rails_[*best];
    if (r.outstanding < b.outstanding ||
        (r.outstanding == b.outstanding && r.bandwidth > b.bandwidth)) {
      best = i;
    }
  }
  next_ = (*best + 1) % rails_.size();
  return best;
}

double RailScheduler::Weight(size_t rail, double fallback) const {
  return rails_[rail].bandwidth > 0 ? rails_[rail].bandwidth : fallback;
}

std::vector<RailSlice> RailScheduler::Split(uint64_t length,
                                            RailSet candidates,
                                            absl::Time now) {
  const RailSet eligible = Eligible(candidates);
  std::vector<size_t> active;
  std::vector<size_t> probing;
  for (size_t i = 0; i < rails_.size(); ++i) {
    if ((eligible & RailBit(i)) == 0) continue;
    (rails_[i].state == RailState::kProbing ? probing : active).push_back(i);
  }
  if (active.empty()) active.swap(probing);  // they carry it all
  const size_t rails = active.size() + probing.size();
  if (rails == 0 || length == 0) return {};

  const uint64_t page = std::max<uint64_t>(options_.page, 1);
  const uint64_t least = AlignUp(std::max<uint64_t>(options_.min_chunk, 1), page);
  const uint64_t most = std::max(least, options_.max_chunk / page * page);
  const uint64_t parts = uint64_t{rails} * std::max(options_.chunks_per_rail, 1u);
  const uint64_t chunk =
      std::clamp(AlignUp((length + parts - 1) / parts, page), least, most);
  const uint64_t chunks = (length + chunk - 1) / chunk;

  std::vector<uint64_t> count(rails_.size(), 0);
  uint64_t left = chunks;
  // A returning rail proves itself with one chunk.
  for (size_t p : probing) {
    if (left == 0) break;
    count[p] = 1;
    --left;
  }
  // The rest in proportion to the rails' bandwidths (largest remainders).
  double measured = 0;
  size_t known = 0;
  for (size_t a : active) {
    if (rails_[a].bandwidth > 0) {
      measured += rails_[a].bandwidth;
      ++known;
    }
  }
  const double fallback = known > 0 ? measured / static_cast<double>(known) : 1;
  double total = 0;
  for (size_t a : active) total += Weight(a, fallback);
  std::vector<std::pair<double, size_t>> remainders;
  uint64_t given = 0;
  for (size_t a : active) {
    const double share =
        static_cast<double>(left) * Weight(a, fallback) / total;
    count[a] = static_cast<uint64_t>(std::floor(share));
    given += count[a];
    remainders.push_back({share - std::floor(share), a});
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  for (size_t k = 0; given < left && k < remainders.size(); ++k, ++given) {
    ++count[remainders[k].second];
  }
  // The occasional probe: a rail not measured for a while gets a chunk,
  // taken from the rail with the most.
  for (size_t a : active) {
    if (count[a] > 0 || now - rails_[a].last_sample < options_.probe_interval) {
      continue;
    }
    size_t richest = a;
    for (size_t b : active) {
      if (count[b] > count[richest]) richest = b;
    }
    if (count[richest] > 1) {
      --count[richest];
      count[a] = 1;
    }
  }

  // Probes first, then the ACTIVE rails in rail order; the last piece
  // (which a WRITE with an immediate holds back) falls to an ACTIVE rail.
  std::vector<RailSlice> slices;
  slices.reserve(chunks);
  uint64_t offset = 0;
  const auto take = [&](size_t rail) {
    for (uint64_t k = 0; k < count[rail] && offset < length; ++k) {
      const uint64_t n = std::min(chunk, length - offset);
      slices.push_back(RailSlice{rail, offset, n});
      offset += n;
    }
  };
  for (size_t p : probing) take(p);
  for (size_t a : active) take(a);
  return slices;
}

void RailScheduler::Posted(size_t rail, uint64_t bytes, absl::Time now) {
  Rail& r = rails_[rail];
  if (r.outstanding == 0) {
    // Busy from now: the next sample's time starts here.
    r.window_start = now;
    r.window_bytes = 0;
  }
  r.outstanding += bytes;
  if (r.state == RailState::kProbing) r.probe_in_flight = true;
}

void RailScheduler::Sample(Rail& r, uint64_t bytes, absl::Time from,
                           absl::Time to) {
  r.window_start = to;
  r.window_bytes = 0;
  const double seconds = absl::ToDoubleSeconds(to - from);
  if (bytes < options_.min_chunk || seconds <= 0) return;
  const double sample = static_cast<double>(bytes) / seconds;
  r.bandwidth_before = r.bandwidth;
  r.bandwidth = r.bandwidth > 0 ? options_.ewma_weight * sample +
                                      (1 - options_.ewma_weight) * r.bandwidth
                                : sample;
  r.last_sample = to;
  r.sample_start = from;
  r.sample_end = to;
  r.sample_bytes = bytes;
}

void RailScheduler::Completed(size_t rail, uint64_t bytes, absl::Time now) {
  Rail& r = rails_[rail];
  r.outstanding -= std::min(r.outstanding, bytes);
  r.bytes += bytes;
  ++r.ops;
  if (r.state == RailState::kProbing) {
    r.state = RailState::kActive;
    r.probe_in_flight = false;
  }
  // A window long enough closes at the completion before this one, which
  // opens the next: its bytes took the time since then.
  if (r.window_bytes > 0 &&
      r.last_completion - r.window_start >= options_.sample_period) {
    Sample(r, r.window_bytes, r.window_start, r.last_completion);
  }
  r.window_bytes += bytes;
  r.last_completion = now;
  if (r.outstanding > 0) return;
  // Fallen idle. A short window right after a sample is the rest of the
  // burst whose first completion closed that sample: one sample of both.
  if (now - r.window_start < options_.sample_period &&
      r.sample_end == r.window_start && r.sample_bytes > 0) {
    r.bandwidth = r.bandwidth_before;
    Sample(r, r.sample_bytes + r.window_bytes, r.sample_start, now);
  } else {
    Sample(r, r.window_bytes, r.window_start, now);
  }
}

void RailScheduler::Failed(size_t rail, uint64_t bytes) {
  Rail& r = rails_[rail];
  r.outstanding -= std::min(r.outstanding, bytes);
  ++r.errors;
  r.probe_in_flight = false;
  // A window with a failure in it measures nothing.
  r.window_bytes = 0;
}

bool RailScheduler::Pause(size_t rail, absl::Time now, std::string why) {
  Rail& r = rails_[rail];
  if (r.state == RailState::kPaused) return false;
  // Failing again soon after coming back: it keeps failing, rest longer.
  const bool again = r.pause > absl::ZeroDuration() &&
                     now - r.resumed_at < options_.pause_max;
  r.pause = again ? std::min(2 * r.pause, options_.pause_max)
                  : options_.pause_min;
  r.state = RailState::kPaused;
  r.paused_until = now + r.pause;
  r.probe_in_flight = false;
  ++r.pauses;
  r.last_error = std::move(why);
  return true;
}

bool RailScheduler::Resume(size_t rail, absl::Time now, bool early) {
  Rail& r = rails_[rail];
  if (r.state != RailState::kPaused || (now < r.paused_until && !early)) {
    return false;
  }
  r.state = RailState::kProbing;
  r.resumed_at = now;
  r.probe_in_flight = false;
  return true;
}

bool RailScheduler::PauseOver(size_t rail, absl::Time now) const {
  const Rail& r = rails_[rail];
  return r.port_active &&
         (r.state != RailState::kPaused || now >= r.paused_until);
}

void RailScheduler::SetPortActive(size_t rail, bool active) {
  rails_[rail].port_active = active;
}

RailStats RailScheduler::Stats(size_t rail, absl::Time now) const {
  const Rail& r = rails_[rail];
  RailStats s;
  s.state = r.state;
  s.port_active = r.port_active;
  s.bytes = r.bytes;
  s.ops = r.ops;
  s.errors = r.errors;
  s.pauses = r.pauses;
  s.outstanding_bytes = r.outstanding;
  s.bandwidth = r.bandwidth;
  if (r.state == RailState::kPaused && r.paused_until > now) {
    s.paused_left = r.paused_until - now;
  }
  s.last_error = r.last_error;
  return s;
}

}  // namespace rdmad::verbs
