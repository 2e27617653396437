// PeerConnection: this daemon's connection to one remote daemon, as an
// explicit state machine.
//
//            Acquire
//   kNew ─────────────▶ kHello ──(a channel in the answer)────────────▶ kReady
//     ▲                  │  ▲ └──(none: choose transport)─▶ kConnecting ─┘ │
//     │                  │  └──── stale / QP error ─────────────┼──────────┘
//     │                  ▼                                      ▼
//     └──── Acquire ── kFailed ◀─────────────────────────────────
//   any state ── Retire ──▶ kRetired (final)
//
// kHello: waits its turn in the handshake admission (a bounded number of
//   handshakes in flight per daemon, handshake_admission.h), then sends
//   Peer.Hello. When there is no channel to reuse, the Hello carries
//   everything one round trip needs: a data channel proposal per transport
//   this daemon would choose (verbs QPs in INIT, or TCP) and the names the
//   waiting transfers want resolved (delivered to the NameCache before
//   the waiters run). The peer answers with the proposal it accepted (its
//   QPs already at RTR; ours reach RTS on the answer, before anything is
//   posted): kReady in one round trip. If it is the run we already have a
//   healthy channel to, that channel is reused (kReady). A peer that is
//   busy (RESOURCE_EXHAUSTED) is asked again after a jittered backoff,
//   while anyone still waits.
// kConnecting: the answer carried no channel (an older peer, or a choice
//   the peer could not serve): Peer.Connect builds one, as before.
// kReady: transfers take the channel (Link). A transfer that lost the
//   connection marks the connection stale: the next Acquire says Hello
//   again. A new incarnation retires the old channel: its keys are dead.
// kFailed: the last handshake failed; the next Acquire tries again.
//
// Answers of an earlier handshake (attempt) are dropped, and the peer
// fences stale proposals by generation (transport/handshake.h). Waiters
// of Acquire fail at their own deadlines (timers), not at the
// handshake's. Thread-safe; callbacks run without the lock held.
#ifndef RDMAD_DAEMON_PEER_PEER_CONNECTION_H_
#define RDMAD_DAEMON_PEER_PEER_CONNECTION_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/export_access_list.h"
#include "daemon/core/transport_kind.h"
#include "daemon/peer/handshake_admission.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/runtime/timers.h"
#include "daemon/transport/transport.h"

namespace rdmad::peer {

enum class PeerState : uint8_t {
  kNew,         // never used
  kHello,       // Peer.Hello waiting for its turn, or in flight
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

// Where the names a Hello answer resolved go (the peer's NameCache): the
// peer's incarnation that resolved them, and the answers.
using NamesSink =
    absl::AnyInvocable<void(uint64_t incarnation, std::vector<ResolvedName>)>;

// What a connection borrows from its daemon (none owned; all outlive it).
struct PeerConnectionContext {
  PeerConnector* connector = nullptr;
  runtime::Timers* timers = nullptr;
  // Bounds the handshakes in flight; null: no bound.
  HandshakeAdmission* admission = nullptr;
  // Called with the peer's address each time a handshake fails, before its
  // waiters hear of it and with no lock held (the table learns which peers
  // to give up first); may be empty.
  std::function<void(const std::string& address)> on_failed;
};

// Owned by a shared_ptr (its callbacks hold it).
class PeerConnection : public std::enable_shared_from_this<PeerConnection> {
 public:
  PeerConnection(std::string address, core::TransportMode mode,
                 PeerConnectionContext context, NamesSink names = nullptr);
  ~PeerConnection();  // Retire()

  PeerConnection(const PeerConnection&) = delete;
  PeerConnection& operator=(const PeerConnection&) = delete;

  const std::string& address() const { return address_; }

  // Calls `done` with a ready link: at once when there is one, else after
  // the handshake completes; with the handshake's error when it fails;
  // DEADLINE_EXCEEDED at `deadline`; UNAVAILABLE once retired. `name`, when
  // given, is resolved in the Hello the waiter's handshake sends.
  void Acquire(absl::Time deadline, Callback<Link> done,
               std::optional<NameRequest> name = std::nullopt);

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
    absl::Time deadline;
    std::optional<NameRequest> name;
    Callback<Link> done;
  };
  using Waiters = std::list<Waiter>;

  // Waits for a handshake slot, then says Hello (attempt `attempt`).
  void Admit(uint64_t attempt);
  void OnAdmitted(uint64_t attempt,
                  absl::StatusOr<HandshakeAdmission::Ticket> ticket);
  // All run with the result of the handshake step `attempt`; a result
  // of an attempt that is no longer current is dropped.
  void OnHello(uint64_t attempt, absl::StatusOr<HelloReply> reply);
  // The peer was too busy to answer: ask again after a backoff, if anyone
  // still waits.
  void RetryLater(uint64_t attempt, const absl::Status& busy);
  // The transports to propose to a peer whose offers are not known yet,
  // best first (the choice if it offers everything, then TCP when the
  // mode allows falling back to it).
  std::vector<core::TransportKind> Proposals() const;
  void OnConnected(
      uint64_t attempt,
      absl::StatusOr<std::shared_ptr<transport::DataChannel>> channel);
  // Ends the handshake: kReady with `link`, or kFailed with the status.
  void Finish(uint64_t attempt, absl::StatusOr<Link> result);
  void Expire(uint64_t waiter_id);
  // Takes every waiter out and cancels their timers.
  Waiters TakeWaiters() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Healthy() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::string address_;
  const core::TransportMode mode_;
  PeerConnector* const connector_;       // Not owned.
  runtime::Timers* const timers_;        // Not owned.
  HandshakeAdmission* const admission_;  // Not owned; may be null.
  const std::function<void(const std::string&)> on_failed_;
  NamesSink names_;

  mutable absl::Mutex mu_;
  PeerState state_ ABSL_GUARDED_BY(mu_) = PeerState::kNew;
  bool stale_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t attempt_ ABSL_GUARDED_BY(mu_) = 0;  // current handshake
  uint64_t incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const core::PeerIdentity> identity_ ABSL_GUARDED_BY(mu_);
  core::TransportKind transport_ ABSL_GUARDED_BY(mu_) =
      core::TransportKind::kNone;
  // What the peer offered in its last Hello (empty before the first).
  std::vector<core::TransportKind> peer_offers_ ABSL_GUARDED_BY(mu_);
  std::string transport_reason_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<transport::DataChannel> channel_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  absl::Time failed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Waiters waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Status retired_ ABSL_GUARDED_BY(mu_);
  // The handshake's slot in the admission, from its turn to its end.
  HandshakeAdmission::Ticket ticket_ ABSL_GUARDED_BY(mu_);
  // Busy answers in a row (for the backoff), and the retry's timer.
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t retry_timer_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_PEER_CONNECTION_H_
