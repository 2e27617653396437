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

// Where connections report failed handshakes (PeerConnectionContext::
// on_failed). Its own lock, taken after the table's and never before it,
// so that a report, from whatever thread and under whatever lock, cannot
// wait on the table. Bounded: a failure left out is still found by the
// SIEVE hand and by the sweep.
struct PeerTableFailures {
  explicit PeerTableFailures(size_t bound) : max(bound) {}
  const size_t max;
  absl::Mutex mu;
  std::vector<std::string> addresses ABSL_GUARDED_BY(mu);
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
      guard_(std::make_shared<PeerTableTimerGuard>()),
      failures_(std::make_shared<PeerTableFailures>(options_.max_peers)) {
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

SieveChoice PeerTable::Classify(const RemotePeer& peer,
                                absl::Time now) const {
  if (peer.in_flight.load() > 0) return SieveChoice::kKeep;
  const PeerConnectionSnapshot s = peer.connection->Snapshot();
  if (s.waiters > 0) return SieveChoice::kKeep;
  if (s.state == PeerState::kFailed ||
      LastUsed(peer) + options_.idle_peer_ttl <= now) {
    return SieveChoice::kTake;
  }
  return SieveChoice::kIfUnvisited;
}

std::shared_ptr<RemotePeer> PeerTable::PopStale(
    std::deque<std::weak_ptr<RemotePeer>>& queue, absl::Time now) {
  while (!queue.empty()) {
    std::shared_ptr<RemotePeer> peer = queue.front().lock();
    queue.pop_front();
    if (peer == nullptr) continue;
    // Still this table's, and still stale: a peer that recovered, or got
    // busy, stays (a later failure queues it again).
    auto it = peers_.find(peer->address);
    if (it == peers_.end() || it->second.peer != peer) continue;
    if (Classify(*peer, now) == SieveChoice::kTake) return peer;
  }
  return nullptr;
}

std::shared_ptr<RemotePeer> PeerTable::ChooseOf(uint32_t holder,
                                                absl::Time now) {
  auto it = held_.find(holder);
  if (it == held_.end()) return nullptr;
  auto chosen = it->second.Choose(
      [&](const std::shared_ptr<RemotePeer>& peer) {
        return Classify(*peer, now);
      });
  return chosen.has_value() ? Queue::Value(*chosen) : nullptr;
}

absl::StatusOr<std::shared_ptr<RemotePeer>> PeerTable::MakeRoomFor(
    uint32_t uid, absl::Time now) {
  const auto mine_it = held_.find(uid);
  const size_t mine = mine_it != held_.end() ? mine_it->second.size() : 0;
  const bool at_bound = mine >= options_.max_peers_per_uid;
  if (!at_bound && peers_.size() < options_.max_peers) return nullptr;
  if (at_bound) {
    if (auto own = ChooseOf(uid, now)) return own;
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", uid, " already holds ", mine,
        " peers (max_peers_per_uid) and each has transfers under way: retry "
        "once some end, or raise max_peers_per_uid in the rdmad config"));
  }
  TakeFailures();
  if (auto failed = PopStale(failed_, now)) return failed;
  if (auto idle = PopStale(idle_, now)) return idle;
  // Then the uids that hold more slots than `uid`, the most first, and
  // last `uid`'s own. (Few uids hold peers: this sorts a handful.)
  std::vector<std::pair<size_t, uint32_t>> holders;
  for (const auto& [holder, queue] : held_) {
    if (queue.size() > mine) holders.emplace_back(queue.size(), holder);
  }
  std::sort(holders.begin(), holders.end(), std::greater<>());
  for (const auto& [count, holder] : holders) {
    if (auto theirs = ChooseOf(holder, now)) return theirs;
  }
  if (auto own = ChooseOf(uid, now)) return own;
  return absl::ResourceExhaustedError(absl::StrCat(
      "this daemon already talks to ", peers_.size(),
      " peers (max_peers) and none can make room for uid ", uid,
      ": those of uids holding more than its ", mine,
      " have transfers under way; raise max_peers in the rdmad config, or "
      "retry once transfers to other peers end"));
}

void PeerTable::Erase(const RemotePeer& peer) {
  auto entry = peers_.find(peer.address);
  if (entry == peers_.end()) return;
  auto it = held_.find(peer.holder_uid);
  if (it != held_.end()) {
    it->second.Erase(entry->second.place);
    if (it->second.empty()) held_.erase(it);
  }
  peers_.erase(entry);
}

void PeerTable::TakeFailures() {
  std::vector<std::string> addresses;
  {
    absl::MutexLock lock(&failures_->mu);
    addresses.swap(failures_->addresses);
  }
  for (const std::string& address : addresses) {
    auto it = peers_.find(address);
    if (it != peers_.end()) failed_.push_back(it->second.peer);
  }
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
    if (it != peers_.end()) {
      // Found again: a use, for the SIEVE hand.
      Queue::Touch(it->second.place);
      return it->second.peer;
    }
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
        PeerConnectionContext{
            connector_, timers_, &admission_,
            [weak = std::weak_ptr<PeerTableFailures>(failures_)](
                const std::string& failed) {
              auto failures = weak.lock();
              if (failures == nullptr) return;
              absl::MutexLock lock(&failures->mu);
              if (failures->addresses.size() < failures->max) {
                failures->addresses.push_back(failed);
              }
            }});
    peer->last_used_ns = absl::ToUnixNanos(now);
    peers_.emplace(address, Entry{peer, held_[uid].Insert(peer)});
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
    // The queues of peers to give up first, rebuilt from what is true now
    // (a failure reported from here on is queued again).
    {
      absl::MutexLock failures_lock(&failures_->mu);
      failures_->addresses.clear();
    }
    failed_.clear();
    idle_.clear();
    std::vector<std::pair<absl::Time, std::shared_ptr<RemotePeer>>> failed;
    for (const auto& [address, entry] : peers_) {
      const std::shared_ptr<RemotePeer>& peer = entry.peer;
      if (peer->in_flight.load() > 0) continue;
      const PeerConnectionSnapshot s = peer->connection->Snapshot();
      if (s.waiters > 0) continue;
      if (s.state == PeerState::kFailed) {
        if (std::max(s.failed_at, LastUsed(*peer)) + options_.failed_peer_ttl <=
            now) {
          gone.push_back(peer);
        } else {
          failed.emplace_back(s.failed_at, peer);
        }
      } else if (LastUsed(*peer) + options_.idle_peer_ttl <= now) {
        idle_.push_back(peer);
      }
    }
    std::sort(failed.begin(), failed.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [at, peer] : failed) failed_.push_back(std::move(peer));
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
  for (const auto& [address, entry] : peers_) all.push_back(entry.peer);
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
