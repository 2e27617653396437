// Which failed transfers the peer layer tries once more, and how.
//
// One-sided WRITE and READ are idempotent, so repeating one that partly
// happened is safe; a retry is worth it only where something this daemon
// holds may be out of date:
//   - UNAVAILABLE: the connection was lost or the peer restarted. Say Hello
//     again (which rebuilds the channel for a new run) and retry.
//   - NOT_FOUND / PERMISSION_DENIED on a region resolved from the name
//     cache: the cached key may be stale (re-exported, freed, recreated).
//     Drop the name, resolve it again and retry — through a new Hello,
//     because a stale rkey also breaks the verbs QP that carried it.
// A WRITE with an immediate is not retried after UNAVAILABLE (TransferFlow):
// its notification may have been delivered, and notifications are at most
// once.
// Nothing else is retried: the peer's other answers (OUT_OF_RANGE,
// INTERNAL, UNIMPLEMENTED...) would only repeat, and DEADLINE_EXCEEDED
// means the time is up. At most one retry per transfer, within its
// deadline.
#ifndef RDMAD_DAEMON_PEER_RETRY_POLICY_H_
#define RDMAD_DAEMON_PEER_RETRY_POLICY_H_

#include "absl/status/status.h"

namespace rdmad::peer {

enum class Retry {
  kNo,
  kReconnect,  // mark the connection stale, then retry
  kReresolve,  // drop the cached name, then retry
};

// `from_cache`: the target was a cached name (not a descriptor, not a
// fresh Resolve).
Retry RetryFor(const absl::Status& status, bool from_cache);

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_RETRY_POLICY_H_
