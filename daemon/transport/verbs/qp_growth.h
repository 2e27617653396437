// QpGrowth: when a peer's pool of RC QPs should grow, and by how much.
//
// A verbs peer starts with one QP and grows only when traffic asks for it,
// so that a thousand mostly idle peers cost a thousand QPs, not
// qps_per_peer thousand. The signal is the one VerbsChannel's submit path
// already has (verbs_channel.cc, Pump): work requests wait in the channel
// because every open QP's send queue is full. A QP's send queue is the
// only thing that stops a WR from going to the NIC at once, so a backlog
// on every QP means more QPs would put more bytes on the wire now, while a
// backlog that a completion clears in microseconds means nothing: the
// backlog must last `hysteresis` (5 ms: a kernel tick or two of the
// coarse clock the channel reads) before a grow starts. A grow doubles the
// pool (1, 2, 4... up to `max_qps`): a batch that fills one QP's queue
// fills two, and doubling reaches the cap in log2 steps, each a handshake.
//
// One grow at a time: while one is in flight, nothing else starts (the
// caller keeps the handshake; concurrent grows to one peer are one). A
// failed grow leaves the pool as it was and is tried again only after a
// backoff that doubles with each failure in a row (`retry_after`, capped
// at `retry_max`), so a peer that cannot add QPs (out of QPs, an old rdmad)
// is not asked on every turn of the loop.
//
// Thread-safety: none; the owner (a channel, on its loop) serializes calls.
// Pure: time is passed in, so that tests drive it with a fake clock.
//
// Example:
//   QpGrowth growth(QpGrowthOptions{.max_qps = 8});
//   // on every pump of the channel:
//   if (uint32_t add = growth.Want(now, open_qps, backlogged); add > 0) {
//     StartGrow(add);  // later: growth.Done(now, ok)
//   }
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_QP_GROWTH_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_QP_GROWTH_H_

#include <cstdint>
#include <optional>

#include "absl/time/time.h"

namespace rdmad::verbs {

struct QpGrowthOptions {
  // The pool's cap (the config's qps_per_peer). 1: the pool never grows.
  uint32_t max_qps = 4;
  // How long every QP's send queue must stay full before a grow starts.
  absl::Duration hysteresis = absl::Milliseconds(5);
  // The wait after the first failed grow; doubles with each failure in a
  // row, up to retry_max.
  absl::Duration retry_after = absl::Milliseconds(200);
  absl::Duration retry_max = absl::Seconds(30);
};

class QpGrowth {
 public:
  explicit QpGrowth(QpGrowthOptions options) : options_(options) {}

  // Called whenever the channel has tried to post: `open_qps` QPs carry
  // the peer's data and `backlogged` says whether WRs still wait because
  // every one of them has a full send queue. Returns how many QPs to add
  // now (0: none); a non-zero answer starts a grow, which the caller ends
  // with Done.
  uint32_t Want(absl::Time now, uint32_t open_qps, bool backlogged);

  // The grow that Want started ended: `ok` when its QPs were added.
  void Done(absl::Time now, bool ok);

  bool growing() const { return growing_; }
  // Failed grows since the last one that worked.
  uint32_t failures() const { return failures_; }

 private:
  const QpGrowthOptions options_;
  std::optional<absl::Time> backlog_since_;
  bool growing_ = false;
  uint32_t failures_ = 0;
  absl::Time retry_at_ = absl::InfinitePast();
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_QP_GROWTH_H_
