// PeerConnection: this daemon's connection to one remote daemon, as an
// explicit state machine.
//
//            Acquire
//   kNew ─────────────▶ kHello ──(choose transport)──▶ kConnecting ──▶ kReady
//     ▲                  │  ▲                             │             │
//     │                  │  └──── stale / QP error ───────┼─────────────┘
//     │                  ▼                                ▼
//     └──── Acquire ── kFailed ◀───────────────────────────
//   any state ── Retire ──▶ kRetired (final)
//
// kHello: Peer.Hello tells the peer's incarnation and transports. If it is
//   the run we already have a healthy channel to, that channel is reused
//   (kReady); otherwise the transport is chosen (transport_choice.h) and
// kConnecting: Peer.Connect builds a new data channel.
// kReady: transfers take the channel (Link). A transfer that lost the
//   connection marks the connection stale: the next Acquire says Hello
//   again. A new incarnation retires the old channel: its keys are dead.
// kFailed: the last handshake failed; the next Acquire tries again.
//
// Waiters of Acquire fail at their own deadlines (timers), not at the
// handshake's. Thread-safe; callbacks run without the lock held.
#ifndef RDMAD_DAEMON_PEER_PEER_CONNECTION_H_
#define RDMAD_DAEMON_PEER_PEER_CONNECTION_H_

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/export_access_list.h"
#include "daemon/core/transport_kind.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/runtime/timers.h"
#include "daemon/transport/transport.h"

namespace rdmad::peer {

enum class PeerState : uint8_t {
  kNew,         // never used
  kHello,       // Peer.Hello in flight
  kConnecting,  // Peer.Connect in flight
  kReady,       // a data channel to the current incarnation
  kFailed,      // the last handshake failed
  kRetired,     // evicted or shut down; final
};

// "NEW", "HELLO", "CONNECTING", "READY", "FAILED", "RETIRED".
absl::string_view PeerStateName(PeerState state);

// What a transfer needs of a ready connection.
struct Link {
  std::shared_ptr<transport::DataChannel> channel;
  uint64_t incarnation = 0;  // of the peer run the channel reaches
  core::TransportKind kind = core::TransportKind::kNone;
};

struct PeerConnectionSnapshot {
  PeerState state = PeerState::kNew;
  uint64_t incarnation = 0;
  core::TransportKind transport = core::TransportKind::kNone;
  std::string transport_reason;
  std::string last_error;
  std::shared_ptr<transport::DataChannel> channel;  // null unless built
  size_t waiters = 0;
  absl::Time failed_at = absl::InfinitePast();  // when it entered kFailed
};

// Owned by a shared_ptr (its callbacks hold it).
class PeerConnection : public std::enable_shared_from_this<PeerConnection> {
 public:
  // `connector` and `timers` are not owned and outlive the connection.
  PeerConnection(std::string address, core::TransportMode mode,
                 PeerConnector* connector, runtime::Timers* timers);
  ~PeerConnection();  // Retire()

  PeerConnection(const PeerConnection&) = delete;
  PeerConnection& operator=(const PeerConnection&) = delete;

  const std::string& address() const { return address_; }

  // Calls `done` with a ready link: at once when there is one, else after
  // Hello (and Connect) complete; with the handshake's error when it
  // fails; DEADLINE_EXCEEDED at `deadline`; UNAVAILABLE once retired.
  void Acquire(absl::Time deadline, Callback<Link> done);

  // The ready link now, if there is one (no handshake is started).
  std::optional<Link> ReadyLink() const;

  // Who answered Hello for the peer run `incarnation` (HelloReply::
  // identity); null when the last Hello reached another run, or none did.
  std::shared_ptr<const core::PeerIdentity> IdentityOf(
      uint64_t incarnation) const;

  // The connection was lost (a transfer failed UNAVAILABLE, a descriptor
  // named another incarnation): the next Acquire says Hello first.
  void MarkStale(const absl::Status& why);

  // A transfer to this peer failed with `status`: what inspection shows as
  // the last error ("CODE: message"), whichever step it came from.
  void RecordError(const absl::Status& status);

  // Final: closes the channel and fails every waiter with `why`.
  void Retire(const absl::Status& why);

  PeerConnectionSnapshot Snapshot() const;

 private:
  struct Waiter {
    uint64_t id = 0;
    uint64_t timer = 0;
    Callback<Link> done;
  };
  using Waiters = std::list<Waiter>;

  // Both run with the result of the handshake step `attempt`; a result
  // of an attempt that is no longer current is dropped.
  void OnHello(uint64_t attempt, absl::StatusOr<HelloReply> reply);
  void OnConnected(uint64_t attempt,
                   absl::StatusOr<std::shared_ptr<transport::DataChannel>>
                       channel);
  // Ends the handshake: kReady with `link`, or kFailed with the status.
  void Finish(uint64_t attempt, absl::StatusOr<Link> result);
  void Expire(uint64_t waiter_id);
  // Takes every waiter out and cancels their timers.
  Waiters TakeWaiters() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Healthy() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::string address_;
  const core::TransportMode mode_;
  PeerConnector* const connector_;  // Not owned.
  runtime::Timers* const timers_;   // Not owned.

  mutable absl::Mutex mu_;
  PeerState state_ ABSL_GUARDED_BY(mu_) = PeerState::kNew;
  bool stale_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t attempt_ ABSL_GUARDED_BY(mu_) = 0;  // current handshake
  uint64_t incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const core::PeerIdentity> identity_ ABSL_GUARDED_BY(mu_);
  core::TransportKind transport_ ABSL_GUARDED_BY(mu_) =
      core::TransportKind::kNone;
  std::string transport_reason_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<transport::DataChannel> channel_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  absl::Time failed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Waiters waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Status retired_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_PEER_CONNECTION_H_
