// PeerTable: the registry of remote daemons this daemon talks to — a thin
// facade over the peer layer's parts:
//   RemotePeer      per peer: PeerConnection (Hello/Connect state machine
//                   and data channel), NameCache, counters;
//   TransferFlow    runs transfers: resolve, send, retry once;
//   PeerConnector   reaches peers' Peer services (gRPC in the daemon, a
//                   fake in tests).
// The table is bounded (max_peers), and shared fairly between local users:
// a peer's slot counts against the uid whose transfer added it, and one uid
// holds at most max_peers_per_uid slots. Each uid's peers sit in a SIEVE
// queue (sieve_queue.h): a peer found again by a later transfer is marked
// used, and the queue's hand gives up the first peer not used since it
// last passed, so peers in steady use outlive one-time ones. Making room
// for a new peer, in this order:
//   1. a uid at its own bound gives up one of its own: a failed peer the
//      hand meets, else the first unused one;
//   2. in a full table, a peer whose handshake failed (anyone's, the
//      oldest failure first) goes, then one idle for idle_peer_ttl, then
//      one of the uid that holds the most slots (more than the asking uid
//      holds: one uid cannot take the slots of another that holds no more
//      than it does), else one of the asking uid's own, each chosen by
//      that uid's SIEVE hand.
// A peer with transfers in flight or waiting for its handshake never
// makes room; when none can, the new peer is refused RESOURCE_EXHAUSTED
// naming the bound. So a local user who names a thousand live addresses
// of their own cannot deny others new peers: each new peer of another
// uid takes one of theirs. Making room costs O(1) amortized (no scan of
// the table): failed peers are queued as their handshakes fail, idle ones
// by the sweep. Failed peers with no traffic are forgotten after
// failed_peer_ttl. How fast one uid may add peers is limited too, so
// naming thousands of unreachable addresses cannot grow the daemon.
//
// Example:
//   GrpcPeerConnector connector(connector_options, std::move(connectors));
//   runtime::LoopTimers timers(runtime->loop(0));
//   PeerTable peers(PeerTableOptions{}, &connector, &timers);
//   core::TransferEngine engine(&regions, &peers);
#ifndef RDMAD_DAEMON_PEER_PEER_TABLE_H_
#define RDMAD_DAEMON_PEER_PEER_TABLE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/peer/handshake_admission.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/peer/peer_queries.h"
#include "daemon/peer/remote_peer.h"
#include "daemon/peer/sieve_queue.h"
#include "daemon/peer/transfer_flow.h"
#include "daemon/runtime/timers.h"

namespace rdmad::peer {

struct PeerTableTimerGuard;
struct PeerTableFailures;

struct PeerTableOptions {
  core::TransportMode mode = core::TransportMode::kAuto;
  // Most peers remembered at once (config max_peers).
  size_t max_peers = 1024;
  // Most of those one uid's transfers may hold (config max_peers_per_uid):
  // at the bound, that uid's own idlest peer makes room for its next.
  size_t max_peers_per_uid = 512;
  // A peer whose last handshake failed and that carried no transfer for
  // this long is forgotten (it shows in ListPeers until then).
  absl::Duration failed_peer_ttl = absl::Minutes(1);
  // When the table is full, a peer idle this long makes room.
  absl::Duration idle_peer_ttl = absl::Minutes(10);
  // New peers one uid may add: a token bucket of this rate and burst. A
  // defence against a local client naming thousands of bogus peers, set
  // so that it never slows a real mesh: a thousand peers at once, and a
  // thousand more every second (config new_peers_per_second_per_uid,
  // new_peers_burst_per_uid).
  double new_peers_per_second = 1000;
  double new_peers_burst = 1000;
  // Handshakes this daemon has in flight at once as the initiator (config
  // handshakes_in_flight); the rest wait their turn in order
  // (handshake_admission.h). For handshake_cold_start after the table is
  // made, each waits a random delay of up to handshake_jitter first (the
  // daemon sets 5 s and 20 ms; none by default).
  size_t handshakes_in_flight = 32;
  absl::Duration handshake_cold_start = absl::ZeroDuration();
  absl::Duration handshake_jitter = absl::ZeroDuration();
  // How often failed peers are looked for.
  absl::Duration sweep_interval = absl::Seconds(10);
};

class PeerTable final : public core::RemoteTransfers, public PeerQueries {
 public:
  // `connector` and `timers` are not owned and outlive the table.
  PeerTable(PeerTableOptions options, PeerConnector* connector,
            runtime::Timers* timers);
  ~PeerTable() override;  // Shutdown()

  PeerTable(const PeerTable&) = delete;
  PeerTable& operator=(const PeerTable&) = delete;

  // core::RemoteTransfers.
  void SubmitBatch(absl::Span<core::Transfer> transfers) override;

  // PeerQueries.
  void Resolve(const core::TransferTarget& target, uint32_t uid,
               absl::Time deadline,
               Callback<TransferFlow::Resolved> done) override {
    flow_.Resolve(target, uid, deadline, std::move(done));
  }
  std::vector<PeerSnapshot> ListPeers() const override;
  std::vector<ConnectionSnapshot> ListConnections() const override;
  size_t size() const override;

  // The peer at `address`, added on first use for `uid` (see the class
  // comment for when that is refused).
  absl::StatusOr<std::shared_ptr<RemotePeer>> Get(const std::string& address,
                                                  uint32_t uid);

  // The handshakes this daemon started: in flight, waiting, peaks.
  HandshakeAdmissionStats handshake_stats() const { return admission_.stats(); }

  // Forgets failed peers that carried no transfer for failed_peer_ttl;
  // returns how many. Runs every sweep_interval by itself.
  size_t Sweep();

  // Begins shutting down: new transfers fail at once with UNAVAILABLE, and
  // transfers still running at `deadline` are failed then (their channels
  // are closed). Lets the gRPC servers' graceful shutdown finish even when
  // a transfer would hang.
  void Drain(absl::Time deadline);

  // Retires every peer: waiters fail with UNAVAILABLE, channels close
  // (their operations fail on their loops soon after). Idempotent.
  void Shutdown();

 private:
  using Queue = SieveQueue<std::shared_ptr<RemotePeer>>;
  struct Entry {
    std::shared_ptr<RemotePeer> peer;
    Queue::Handle place;  // in its holder's queue
  };
  // What Choose does with `peer` (kKeep while it has transfers under way or
  // waiting for its handshake; kTake when failed or idle_peer_ttl idle).
  SieveChoice Classify(const RemotePeer& peer, absl::Time now) const;
  // The peer queued in `queue` (failed_ or idle_) that can make room now,
  // popping those that no longer can; null when none.
  std::shared_ptr<RemotePeer> PopStale(
      std::deque<std::weak_ptr<RemotePeer>>& queue, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `holder`'s SIEVE choice, or null.
  std::shared_ptr<RemotePeer> ChooseOf(uint32_t holder, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Picks the peer that makes room for a new one of `uid` (see the class
  // comment), or returns RESOURCE_EXHAUSTED saying why none can; null when
  // no room needs to be made.
  absl::StatusOr<std::shared_ptr<RemotePeer>> MakeRoomFor(uint32_t uid,
                                                          absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `peer` from the table and from its holder's queue.
  void Erase(const RemotePeer& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues the peers whose handshakes failed since the last call (they go
  // first when room is needed).
  void TakeFailures() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status TakeNewPeerToken(uint32_t uid, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleSweep();
  std::vector<std::shared_ptr<RemotePeer>> All() const;

  const PeerTableOptions options_;
  PeerConnector* const connector_;  // Not owned.
  runtime::Timers* const timers_;   // Not owned.
  // Bounds the handshakes the peers' connections start.
  HandshakeAdmission admission_;
  TransferFlow flow_;
  // Lets timer callbacks reach the table while it lives.
  const std::shared_ptr<PeerTableTimerGuard> guard_;
  // Handshake failures the peers' connections reported.
  const std::shared_ptr<PeerTableFailures> failures_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> peers_ ABSL_GUARDED_BY(mu_);
  // The peers each uid holds (RemotePeer::holder_uid), in their SIEVE
  // order; uids holding none are not in it.
  absl::flat_hash_map<uint32_t, Queue> held_ ABSL_GUARDED_BY(mu_);
  // Peers that may make room before any other, oldest first: those whose
  // handshake failed (as it fails, and again at each sweep), and those the
  // sweep found idle for idle_peer_ttl. Each is checked again when popped;
  // the sweep rebuilds both, so neither outgrows the table for long.
  std::deque<std::weak_ptr<RemotePeer>> failed_ ABSL_GUARDED_BY(mu_);
  std::deque<std::weak_ptr<RemotePeer>> idle_ ABSL_GUARDED_BY(mu_);
  struct Bucket {
    double tokens = 0;
    absl::Time refilled;
  };
  absl::flat_hash_map<uint32_t, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  uint64_t sweep_timer_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t drain_timer_ ABSL_GUARDED_BY(mu_) = 0;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_PEER_TABLE_H_
