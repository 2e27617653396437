// Fakes for unit tests of the peer layer (daemon/peer): a clock whose
// timers run when the test advances it, a PeerConnector that plays any
// number of remote daemons in memory, and a DataChannel that records what
// is posted and completes it as told.
#ifndef RDMAD_TESTS_UNIT_FAKES_PEER_FAKES_H_
#define RDMAD_TESTS_UNIT_FAKES_PEER_FAKES_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/runtime/timers.h"
#include "daemon/transport/transport.h"

namespace rdmad::peer::testing {

// The peer most tests talk to.
inline constexpr char kPeer[] = "10.0.0.2:7471";

// Timers that fire only when the test calls Advance.
class FakeTimers final : public runtime::Timers {
 public:
  uint64_t RunAt(absl::Time when, absl::AnyInvocable<void()> task) override {
    absl::MutexLock lock(&mu_);
    const uint64_t id = next_++;
    tasks_.emplace(std::make_pair(when, id), std::move(task));
    return id;
  }
  void Cancel(uint64_t id) override {
    absl::MutexLock lock(&mu_);
    for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
      if (it->first.second == id) {
        tasks_.erase(it);
        return;
      }
    }
  }
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  absl::Time CoarseNow() const override { return Now(); }
  // Moves the clock and runs what fell due, in time order.
  void Advance(absl::Duration d) {
    absl::Time until;
    {
      absl::MutexLock lock(&mu_);
      until = now_ + d;
    }
    for (;;) {
      absl::AnyInvocable<void()> task;
      {
        absl::MutexLock lock(&mu_);
        if (tasks_.empty() || tasks_.begin()->first.first > until) {
          now_ = until;
          return;
        }
        now_ = std::max(now_, tasks_.begin()->first.first);
        task = std::move(tasks_.begin()->second);
        tasks_.erase(tasks_.begin());
      }
      task();
    }
  }
  size_t pending() const {
    absl::MutexLock lock(&mu_);
    return tasks_.size();
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
  uint64_t next_ = 1;
  std::map<std::pair<absl::Time, uint64_t>, absl::AnyInvocable<void()>> tasks_;
};

// A data channel that records each Post and completes ops with `result`
// at once, or holds them when `hold` is set.
class FakeChannel final : public transport::DataChannel {
 public:
  explicit FakeChannel(core::TransportKind kind) : kind_(kind) {}

  core::TransportKind kind() const override { return kind_; }
  absl::StatusOr<transport::RemoteKey> KeyFor(
      const core::RemoteRegionInfo& region) const override {
    if (region.tcp_key == 0) {
      return absl::FailedPreconditionError("no key for this transport");
    }
    return transport::RemoteKey{region.region_id, region.tcp_key};
  }
  void Post(absl::Span<transport::RemoteOp> ops) override {
    std::vector<transport::RemoteOp> run;
    absl::Status result;
    {
      absl::MutexLock lock(&mu_);
      batches_.push_back(ops.size());
      for (auto& op : ops) {
        keys_.push_back(op.key);
        if (closed_ || !hold_) {
          run.push_back(std::move(op));
        } else {
          held_.push_back(std::move(op));
        }
      }
      result = closed_ ? absl::UnavailableError("closed") : result_;
    }
    for (auto& op : run) {
      absl::Status status = result;
      {
        absl::MutexLock lock(&mu_);
        if (!failures_.empty() && status.ok()) {
          status = failures_.front();
          failures_.pop_front();
        }
      }
      op.done(std::move(status));
    }
  }
  transport::ChannelInfo Describe() const override {
    transport::ChannelInfo info;
    info.kind = kind_;
    absl::MutexLock lock(&mu_);
    info.state = closed_ ? transport::ChannelState::kClosed
                         : transport::ChannelState::kReady;
    info.rails = rails_;
    return info;
  }
  bool NeedsReconnect() const override {
    absl::MutexLock lock(&mu_);
    return broken_;
  }
  void Close() override {
    std::deque<transport::RemoteOp> held;
    {
      absl::MutexLock lock(&mu_);
      closed_ = true;
      held.swap(held_);
    }
    for (auto& op : held) op.done(absl::UnavailableError("closed"));
  }

  // What ops complete with from now on.
  void set_result(absl::Status s) {
    absl::MutexLock lock(&mu_);
    result_ = std::move(s);
  }
  void set_hold(bool hold) {
    absl::MutexLock lock(&mu_);
    hold_ = hold;
  }
  // The next ops that complete fail with these, one each, in order.
  void FailNext(std::vector<absl::Status> failures) {
    absl::MutexLock lock(&mu_);
    for (auto& f : failures) failures_.push_back(std::move(f));
  }
  size_t posted() const {
    absl::MutexLock lock(&mu_);
    return keys_.size();
  }
  void set_broken(bool broken) {
    absl::MutexLock lock(&mu_);
    broken_ = broken;
  }
  // What Describe shows of its rails.
  void set_rails(std::vector<transport::RailInfo> rails) {
    absl::MutexLock lock(&mu_);
    rails_ = std::move(rails);
  }
  // Completes the held ops with `s`.
  void Release(absl::Status s) {
    std::deque<transport::RemoteOp> held;
    {
      absl::MutexLock lock(&mu_);
      held.swap(held_);
    }
    for (auto& op : held) op.done(s);
  }
  std::vector<size_t> batches() const {
    absl::MutexLock lock(&mu_);
    return batches_;
  }
  std::vector<transport::RemoteKey> keys() const {
    absl::MutexLock lock(&mu_);
    return keys_;
  }
  size_t held() const {
    absl::MutexLock lock(&mu_);
    return held_.size();
  }
  bool closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

 private:
  const core::TransportKind kind_;
  mutable absl::Mutex mu_;
  absl::Status result_;
  bool hold_ = false;
  bool broken_ = false;
  bool closed_ = false;
  std::deque<transport::RemoteOp> held_;
  std::deque<absl::Status> failures_;
  std::vector<size_t> batches_;
  std::vector<transport::RemoteKey> keys_;
  std::vector<transport::RailInfo> rails_;
};

// Plays remote daemons. Each answers at once from its state, unless
// `hold_hello` is set: then Hello answers wait for ReleaseHellos. Like a
// current rdmad, a remote accepts the first data channel a Hello proposes
// that it offers, and resolves the Hello's names; set_old_peers(true)
// makes every remote answer the Hello alone, as an older rdmad does.
class FakeConnector final : public PeerConnector {
 public:
  struct Remote {
    uint64_t incarnation = 1;
    std::vector<core::TransportKind> transports = {core::TransportKind::kTcp};
    absl::Status hello_error;    // Hello fails with this when set
    absl::Status resolve_error;  // Resolve fails with this when set
    std::map<std::string, core::RemoteRegionInfo> regions;  // by name
    core::PeerIdentity identity;                            // who answers Hello
  };

  bool CanUse(core::TransportKind kind, std::string* why) const override {
    if (kind == core::TransportKind::kVerbs && !verbs_) {
      if (why != nullptr) *why = "no RDMA here";
      return false;
    }
    return true;
  }

  void Hello(const std::string& address, Handshake handshake,
             Callback<HelloReply> done) override {
    absl::StatusOr<HelloReply> reply;
    {
      absl::MutexLock lock(&mu_);
      ++hellos_[address];
      handshakes_[address].push_back(handshake);
      if (hold_hello_) {
        held_hellos_.push_back(
            {address, std::move(handshake), std::move(done)});
        return;
      }
      reply = HelloOf(address, handshake);
    }
    done(std::move(reply));
  }

  void Connect(const std::string& address, core::TransportKind kind,
               uint64_t incarnation,
               Callback<std::shared_ptr<transport::DataChannel>> done) override {
    absl::StatusOr<std::shared_ptr<transport::DataChannel>> result;
    {
      absl::MutexLock lock(&mu_);
      ++connects_[address];
      auto it = remotes_.find(address);
      if (it == remotes_.end() || it->second.incarnation != incarnation) {
        result = absl::UnavailableError(
            absl::StrCat("peer ", address, " restarted while connecting"));
      } else {
        auto channel = std::make_shared<FakeChannel>(kind);
        channels_[address].push_back(channel);
        result = channel;
      }
    }
    done(std::move(result));
  }

  void Resolve(const std::string& address, const std::string& name,
               uint32_t uid, Callback<core::RemoteRegionInfo> done) override {
    absl::StatusOr<core::RemoteRegionInfo> result;
    {
      absl::MutexLock lock(&mu_);
      ++resolves_[address];
      last_uid_ = uid;
      if (hold_resolve_) {
        held_resolves_.push_back({address, name, std::move(done)});
        return;
      }
      result = ResolveOf(address, name);
    }
    done(std::move(result));
  }

  void set_hold_resolve(bool hold) {
    absl::MutexLock lock(&mu_);
    hold_resolve_ = hold;
  }
  void ReleaseResolves() {
    std::vector<HeldResolve> held;
    {
      absl::MutexLock lock(&mu_);
      held.swap(held_resolves_);
    }
    for (auto& h : held) {
      absl::StatusOr<core::RemoteRegionInfo> result;
      {
        absl::MutexLock lock(&mu_);
        result = ResolveOf(h.address, h.name);
      }
      h.done(std::move(result));
    }
  }

 private:
  struct HeldResolve {
    std::string address, name;
    Callback<core::RemoteRegionInfo> done;
  };
  absl::StatusOr<core::RemoteRegionInfo> ResolveOf(const std::string& address,
                                                   const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<core::RemoteRegionInfo> result;
    {
      auto it = remotes_.find(address);
      if (it == remotes_.end()) {
        result = absl::UnavailableError("unreachable");
      } else if (!it->second.resolve_error.ok()) {
        result = it->second.resolve_error;
      } else if (auto r = it->second.regions.find(name);
                 r == it->second.regions.end()) {
        result = absl::NotFoundError(absl::StrCat("no region ", name));
      } else {
        result = r->second;
        result->incarnation = it->second.incarnation;
        result->peer = address;
      }
    }
    return result;
  }
  bool hold_resolve_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<HeldResolve> held_resolves_ ABSL_GUARDED_BY(mu_);

 public:
  void Forget(const std::string& address) override {
    absl::MutexLock lock(&mu_);
    ++forgets_[address];
  }

  // --- Test controls ---
  void SetRemote(const std::string& address, Remote remote) {
    absl::MutexLock lock(&mu_);
    remotes_[address] = std::move(remote);
  }
  Remote& remote(const std::string& address) {
    absl::MutexLock lock(&mu_);
    return remotes_[address];
  }
  void set_verbs(bool verbs) { verbs_ = verbs; }
  void set_hold_hello(bool hold) {
    absl::MutexLock lock(&mu_);
    hold_hello_ = hold;
  }
  void ReleaseHellos() {
    std::vector<HeldHello> held;
    {
      absl::MutexLock lock(&mu_);
      held.swap(held_hellos_);
    }
    for (auto& h : held) {
      absl::StatusOr<HelloReply> reply;
      {
        absl::MutexLock lock(&mu_);
        reply = HelloOf(h.address, h.handshake);
      }
      h.done(std::move(reply));
    }
  }
  // Remotes answer Hello alone, as an rdmad before one-round-trip
  // handshakes did.
  void set_old_peers(bool old) {
    absl::MutexLock lock(&mu_);
    old_peers_ = old;
  }
  // The handshakes Hello carried to `address`, oldest first.
  std::vector<Handshake> handshakes(const std::string& a) const {
    absl::MutexLock lock(&mu_);
    auto it = handshakes_.find(a);
    return it == handshakes_.end() ? std::vector<Handshake>() : it->second;
  }
  int hellos(const std::string& a) const { return Count(hellos_, a); }
  int connects(const std::string& a) const { return Count(connects_, a); }
  int resolves(const std::string& a) const { return Count(resolves_, a); }
  // Names resolved for `a`: by Resolve, and in Hello answers.
  int names_resolved(const std::string& a) const {
    return Count(resolves_, a) + Count(hello_names_, a);
  }
  int forgets(const std::string& a) const { return Count(forgets_, a); }
  uint32_t last_uid() const {
    absl::MutexLock lock(&mu_);
    return last_uid_;
  }
  // The channels built to `address`, oldest first.
  std::vector<std::shared_ptr<FakeChannel>> channels(const std::string& a) {
    absl::MutexLock lock(&mu_);
    return channels_[a];
  }

 private:
  struct HeldHello {
    std::string address;
    Handshake handshake;
    Callback<HelloReply> done;
  };
  absl::StatusOr<HelloReply> HelloOf(const std::string& address,
                                     const Handshake& handshake)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = remotes_.find(address);
    if (it == remotes_.end()) {
      return absl::UnavailableError(
          absl::StrCat("peer ", address, " is unreachable"));
    }
    if (!it->second.hello_error.ok()) return it->second.hello_error;
    HelloReply reply{it->second.incarnation, it->second.transports,
                     it->second.identity};
    if (old_peers_) return reply;
    for (core::TransportKind kind : handshake.propose) {
      const auto& offers = it->second.transports;
      if (std::find(offers.begin(), offers.end(), kind) == offers.end()) {
        continue;
      }
      auto channel = std::make_shared<FakeChannel>(kind);
      channels_[address].push_back(channel);
      reply.channel = channel;
      reply.channel_kind = kind;
      break;
    }
    for (const NameRequest& name : handshake.names) {
      ++hello_names_[address];
      last_uid_ = name.uid;
      reply.names.push_back({name, ResolveOf(address, name.name)});
    }
    return reply;
  }
  int Count(const absl::flat_hash_map<std::string, int>& m,
            const std::string& a) const {
    absl::MutexLock lock(&mu_);
    auto it = m.find(a);
    return it == m.end() ? 0 : it->second;
  }

  mutable absl::Mutex mu_;
  bool verbs_ = false;
  bool hold_hello_ ABSL_GUARDED_BY(mu_) = false;
  bool old_peers_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, Remote> remotes_ ABSL_GUARDED_BY(mu_);
  std::vector<HeldHello> held_hellos_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::vector<Handshake>> handshakes_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> hello_names_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::vector<std::shared_ptr<FakeChannel>>>
      channels_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> hellos_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> connects_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> resolves_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> forgets_ ABSL_GUARDED_BY(mu_);
  uint32_t last_uid_ ABSL_GUARDED_BY(mu_) = 0;
};

// A region as a remote daemon would describe it.
inline core::RemoteRegionInfo Region(uint64_t id, const std::string& name,
                                     uint64_t length,
                                     core::RemoteAccess access,
                                     uint64_t key) {
  core::RemoteRegionInfo r;
  r.region_id = id;
  r.name = name;
  r.length = length;
  r.access = access;
  r.tcp_key = key;
  return r;
}

}  // namespace rdmad::peer::testing

#endif  // RDMAD_TESTS_UNIT_FAKES_PEER_FAKES_H_
