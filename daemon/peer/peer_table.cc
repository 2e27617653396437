#include "daemon/peer/peer_table.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "spdlog/spdlog.h"

namespace rdmad::peer {

// What timer callbacks reach the table through: Shutdown clears it, and
// waits for a callback that is running, so none runs on a dead table.
struct PeerTableTimerGuard {
  absl::Mutex mu;
  PeerTable* table ABSL_GUARDED_BY(mu) = nullptr;
};

namespace {

absl::Time LastUsed(const RemotePeer& peer) {
  return absl::FromUnixNanos(peer.last_used_ns.load());
}

}  // namespace

PeerTable::PeerTable(PeerTableOptions options, PeerConnector* connector,
                     runtime::Timers* timers)
    : options_(std::move(options)),
      connector_(connector),
      timers_(timers),
      admission_(
          HandshakeAdmissionOptions{
              .role = "initiator",
              .max_in_flight = options_.handshakes_in_flight,
              // Each connection waits once: the table bounds the queue.
              .max_queued = std::numeric_limits<size_t>::max(),
              .cold_start = options_.handshake_cold_start,
              .cold_start_jitter = options_.handshake_jitter},
          timers),
      flow_([this](const std::string& address,
                   uint32_t uid) { return Get(address, uid); },
            timers),
      guard_(std::make_shared<PeerTableTimerGuard>()) {
  {
    absl::MutexLock lock(&guard_->mu);
    guard_->table = this;
  }
  ScheduleSweep();
}

PeerTable::~PeerTable() { Shutdown(); }

void PeerTable::ScheduleSweep() {
  std::weak_ptr<PeerTableTimerGuard> weak = guard_;
  const uint64_t id = timers_->RunAt(
      timers_->Now() + options_.sweep_interval, [weak] {
        auto guard = weak.lock();
        if (guard == nullptr) return;
        absl::MutexLock lock(&guard->mu);
        if (guard->table == nullptr) return;
        guard->table->Sweep();
        guard->table->ScheduleSweep();
      });
  absl::MutexLock lock(&mu_);
  sweep_timer_ = id;
}

void PeerTable::SubmitBatch(absl::Span<core::Transfer> transfers) {
  flow_.SubmitBatch(transfers);
}

absl::Status PeerTable::TakeNewPeerToken(uint32_t uid, absl::Time now) {
  Bucket& b = buckets_[uid];
  if (b.refilled == absl::Time()) {
    b.tokens = options_.new_peers_burst;
  } else {
    b.tokens = std::min(options_.new_peers_burst,
                        b.tokens + absl::ToDoubleSeconds(now - b.refilled) *
                                       options_.new_peers_per_second);
  }
  b.refilled = now;
  if (b.tokens < 1) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", uid, " is adding peers faster than ",
        options_.new_peers_per_second,
        " per second: reuse the peers you have, or wait and retry"));
  }
  b.tokens -= 1;
  return absl::OkStatus();
}

// The best peer to forget among those offered: a failed one (the oldest
// failure first), else the idlest.
class PeerTable::Candidates {
 public:
  void Offer(const std::shared_ptr<RemotePeer>& peer,
             const PeerConnectionSnapshot& s) {
    if (s.state == PeerState::kFailed) {
      if (s.failed_at < failed_at_) {
        failed_ = peer;
        failed_at_ = s.failed_at;
      }
    } else if (LastUsed(*peer) < idle_since_) {
      idle_ = peer;
      idle_since_ = LastUsed(*peer);
    }
  }
  std::shared_ptr<RemotePeer> Best() const {
    return failed_ != nullptr ? failed_ : idle_;
  }

 private:
  std::shared_ptr<RemotePeer> failed_, idle_;
  absl::Time failed_at_ = absl::InfiniteFuture();
  absl::Time idle_since_ = absl::InfiniteFuture();
};

absl::StatusOr<std::shared_ptr<RemotePeer>> PeerTable::MakeRoomFor(
    uint32_t uid, absl::Time now) const {
  const auto mine_it = held_.find(uid);
  const size_t mine = mine_it != held_.end() ? mine_it->second : 0;
  const bool at_bound = mine >= options_.max_peers_per_uid;
  if (!at_bound && peers_.size() < options_.max_peers) return nullptr;
  // One pass: per holder, the peer it could best give up; and, whoever
  // holds them, failed and long-idle peers. Peers with transfers under way
  // or waiting for their handshake are never offered.
  absl::flat_hash_map<uint32_t, Candidates> by_holder;
  Candidates stale;
  for (const auto& [address, peer] : peers_) {
    if (peer->in_flight.load() > 0) continue;
    const PeerConnectionSnapshot s = peer->connection->Snapshot();
    if (s.waiters > 0) continue;
    by_holder[peer->holder_uid].Offer(peer, s);
    if (s.state == PeerState::kFailed ||
        LastUsed(*peer) + options_.idle_peer_ttl <= now) {
      stale.Offer(peer, s);
    }
  }
  auto best_of = [&](uint32_t holder) -> std::shared_ptr<RemotePeer> {
    auto it = by_holder.find(holder);
    return it != by_holder.end() ? it->second.Best() : nullptr;
  };
  if (at_bound) {
    if (auto own = best_of(uid)) return own;
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", uid, " already holds ", mine,
        " peers (max_peers_per_uid) and each has transfers under way: retry "
        "once some end, or raise max_peers_per_uid in the rdmad config"));
  }
  if (auto any = stale.Best()) return any;
  // Then the uids that hold more slots than `uid`, the most first, and
  // last `uid`'s own.
  std::vector<std::pair<size_t, uint32_t>> holders;
  for (const auto& [holder, count] : held_) {
    if (count > mine) holders.emplace_back(count, holder);
  }
  std::sort(holders.begin(), holders.end(), std::greater<>());
  for (const auto& [count, holder] : holders) {
    if (auto theirs = best_of(holder)) return theirs;
  }
  if (auto own = best_of(uid)) return own;
  return absl::ResourceExhaustedError(absl::StrCat(
      "this daemon already talks to ", peers_.size(),
      " peers (max_peers) and none can make room for uid ", uid,
      ": those of uids holding more than its ", mine,
      " have transfers under way; raise max_peers in the rdmad config, or "
      "retry once transfers to other peers end"));
}

void PeerTable::Erase(const RemotePeer& peer) {
  peers_.erase(peer.address);
  auto it = held_.find(peer.holder_uid);
  if (it != held_.end() && --it->second == 0) held_.erase(it);
}

absl::StatusOr<std::shared_ptr<RemotePeer>> PeerTable::Get(
    const std::string& address, uint32_t uid) {
  std::shared_ptr<RemotePeer> evicted;
  std::shared_ptr<RemotePeer> peer;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) {
      return absl::UnavailableError("this daemon is shutting down");
    }
    auto it = peers_.find(address);
    if (it != peers_.end()) return it->second;
    // Only a new peer needs the time (every transfer comes through here).
    const absl::Time now = timers_->Now();
    if (absl::Status s = ParseHostPort(address).status(); !s.ok()) return s;
    auto room = MakeRoomFor(uid, now);
    if (!room.ok()) return room.status();
    evicted = *std::move(room);
    if (absl::Status s = TakeNewPeerToken(uid, now); !s.ok()) return s;
    if (evicted != nullptr) Erase(*evicted);
    peer = std::make_shared<RemotePeer>(
        address, uid, options_.mode,
        PeerConnectionContext{connector_, timers_, &admission_});
    peer->last_used_ns = absl::ToUnixNanos(now);
    peers_.emplace(address, peer);
    ++held_[uid];
  }
  if (evicted != nullptr) {
    evicted->connection->Retire(absl::UnavailableError(absl::StrCat(
        "peer ", evicted->address, " was forgotten to make room")));
    connector_->Forget(evicted->address);
    spdlog::info("forgot peer {} (added for uid {}) to make room for {} ({})",
                 evicted->address, evicted->holder_uid, address,
                 absl::StrCat("uid ", uid));
  }
  return peer;
}

size_t PeerTable::Sweep() {
  const absl::Time now = timers_->Now();
  std::vector<std::shared_ptr<RemotePeer>> gone;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [address, peer] : peers_) {
      const PeerConnectionSnapshot s = peer->connection->Snapshot();
      const bool expired =
          s.state == PeerState::kFailed && s.waiters == 0 &&
          peer->in_flight.load() == 0 &&
          std::max(s.failed_at, LastUsed(*peer)) + options_.failed_peer_ttl <=
              now;
      if (expired) gone.push_back(peer);
    }
    for (const auto& peer : gone) Erase(*peer);
    // Buckets of uids that are full again hold nothing worth keeping.
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      const double refill = absl::ToDoubleSeconds(now - it->second.refilled) *
                            options_.new_peers_per_second;
      if (it->second.tokens + refill >= options_.new_peers_burst) {
        buckets_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (const auto& peer : gone) {
    peer->connection->Retire(absl::UnavailableError(
        absl::StrCat("peer ", peer->address, " was forgotten")));
    connector_->Forget(peer->address);
    spdlog::info("forgot peer {}: unreachable and unused for {}",
                 peer->address, absl::FormatDuration(options_.failed_peer_ttl));
  }
  return gone.size();
}

std::vector<std::shared_ptr<RemotePeer>> PeerTable::All() const {
  std::vector<std::shared_ptr<RemotePeer>> all;
  absl::MutexLock lock(&mu_);
  all.reserve(peers_.size());
  for (const auto& [address, peer] : peers_) all.push_back(peer);
  std::sort(all.begin(), all.end(),
            [](const auto& a, const auto& b) { return a->address < b->address; });
  return all;
}

size_t PeerTable::size() const {
  absl::MutexLock lock(&mu_);
  return peers_.size();
}

std::vector<PeerSnapshot> PeerTable::ListPeers() const {
  std::vector<PeerSnapshot> out;
  for (const auto& peer : All()) {
    const PeerConnectionSnapshot c = peer->connection->Snapshot();
    PeerSnapshot s;
    s.address = peer->address;
    s.incarnation = c.incarnation;
    s.transport = c.transport;
    s.transport_reason = c.transport_reason;
    s.state = c.state;
    s.last_error = c.last_error;
    if (c.state == PeerState::kReady && c.channel != nullptr) {
      const transport::ChannelInfo info = c.channel->Describe();
      s.channel_state = info.state;
      if (s.last_error.empty()) s.last_error = info.last_error;
      s.rails = info.rails;
    }
    s.bytes_written = peer->bytes_written.load();
    s.bytes_read = peer->bytes_read.load();
    s.ops_completed = peer->ops_completed.load();
    s.ops_failed = peer->ops_failed.load();
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<ConnectionSnapshot> PeerTable::ListConnections() const {
  std::vector<ConnectionSnapshot> out;
  for (const auto& peer : All()) {
    const PeerConnectionSnapshot c = peer->connection->Snapshot();
    if (c.channel == nullptr) continue;
    transport::ChannelInfo info = c.channel->Describe();
    for (auto& connection : info.connections) {
      out.push_back({peer->address, info.kind, std::move(connection)});
    }
  }
  return out;
}

void PeerTable::Drain(absl::Time deadline) {
  flow_.Drain();
  std::weak_ptr<PeerTableTimerGuard> weak = guard_;
  const uint64_t id = timers_->RunAt(deadline, [weak] {
    auto guard = weak.lock();
    if (guard == nullptr) return;
    absl::MutexLock lock(&guard->mu);
    if (guard->table == nullptr) return;
    spdlog::info("failing transfers still running at the end of the "
                 "shutdown grace period");
    for (const auto& peer : guard->table->All()) {
      peer->connection->Retire(
          absl::UnavailableError("this daemon is shutting down"));
    }
  });
  absl::MutexLock lock(&mu_);
  drain_timer_ = id;
}

void PeerTable::Shutdown() {
  {
    absl::MutexLock lock(&guard_->mu);
    guard_->table = nullptr;
  }
  flow_.Drain();
  std::vector<std::shared_ptr<RemotePeer>> peers;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    if (sweep_timer_ != 0) timers_->Cancel(sweep_timer_);
    if (drain_timer_ != 0) timers_->Cancel(drain_timer_);
  }
  for (const auto& peer : All()) {
    peer->connection->Retire(
        absl::UnavailableError("this daemon is shutting down"));
  }
}

}  // namespace rdmad::peer
