#include "daemon/peer/name_cache.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace rdmad::peer {

NameCache::NameCache(std::string address, PeerConnector* connector,
                     runtime::Timers* timers)
    : address_(std::move(address)), connector_(connector), timers_(timers) {}

ResolvedRegion NameCache::Find(const std::string& name, uint32_t uid,
                               uint64_t incarnation) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(Key{uid, name});
  if (it == entries_.end() || it->second.region->incarnation != incarnation) {
    return nullptr;
  }
  return it->second.region;
}

size_t NameCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

void NameCache::Lookup(const std::string& name, uint32_t uid,
                       uint64_t incarnation, absl::Time deadline,
                       Callback<ResolvedRegion> done) {
  ResolvedRegion cached;
  bool first = false;
  const Key key{uid, name};
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.region->incarnation == incarnation) {
      cached = it->second.region;
    } else {
      Pending& pending = resolving_[key];
      // A Resolve out for an older incarnation does not answer this one:
      // start another (the older one's answer is then dropped).
      first = pending.waiters.empty() || pending.incarnation != incarnation;
      pending.incarnation = incarnation;
      Waiter& w = pending.waiters.emplace_back();
      w.id = next_waiter_++;
      w.done = std::move(done);
      std::weak_ptr<NameCache> weak = weak_from_this();
      w.timer = timers_->RunAt(deadline, [weak, key, id = w.id] {
        if (auto self = weak.lock()) self->Expire(key, id);
      });
    }
  }
  if (cached != nullptr) return done(std::move(cached));
  if (!first) return;
  connector_->Resolve(
      address_, name, uid,
      [self = shared_from_this(), key,
       incarnation](absl::StatusOr<core::RemoteRegionInfo> result) {
        self->OnResolved(key, incarnation, std::move(result));
      });
}

void NameCache::OnResolved(const Key& key, uint64_t incarnation,
                           absl::StatusOr<core::RemoteRegionInfo> result) {
  const std::string& name = key.second;
  absl::StatusOr<ResolvedRegion> answer =
      !result.ok() ? absl::StatusOr<ResolvedRegion>(result.status())
      : result->incarnation != incarnation
          ? absl::StatusOr<ResolvedRegion>(absl::UnavailableError(absl::StrCat(
                "peer ", address_, " restarted since Hello (it answered "
                "Resolve of '", name, "' from another run)")))
          : absl::StatusOr<ResolvedRegion>(
                std::make_shared<const core::RemoteRegionInfo>(
                    *std::move(result)));
  std::list<Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto it = resolving_.find(key);
    if (it == resolving_.end() || it->second.incarnation != incarnation) {
      return;  // superseded by a look-up for a newer incarnation
    }
    waiters.swap(it->second.waiters);
    resolving_.erase(it);
    if (answer.ok()) Store(key, *answer);
    for (const Waiter& w : waiters) timers_->Cancel(w.timer);
  }
  for (Waiter& w : waiters) w.done(answer);
}

void NameCache::Store(const Key& key, ResolvedRegion region) {
  auto existing = entries_.find(key);
  if (existing != entries_.end()) {
    order_.erase(existing->second.age);
    entries_.erase(existing);
  }
  order_.push_back(key);
  entries_[key] = Entry{std::move(region), std::prev(order_.end())};
  while (entries_.size() > kMaxEntries) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
}

void NameCache::Insert(uint64_t incarnation, std::vector<ResolvedName> names) {
  absl::MutexLock lock(&mu_);
  for (ResolvedName& n : names) {
    // Failures are not kept: a transfer that needs the name asks again
    // and gets the answer (and its error) itself.
    if (!n.region.ok() || n.region->incarnation != incarnation) continue;
    Store(Key{n.request.uid, n.request.name},
          std::make_shared<const core::RemoteRegionInfo>(*std::move(n.region)));
  }
}

void NameCache::Expire(const Key& key, uint64_t waiter_id) {
  const std::string& name = key.second;
  Callback<ResolvedRegion> done;
  {
    absl::MutexLock lock(&mu_);
    auto it = resolving_.find(key);
    if (it == resolving_.end()) return;
    for (auto w = it->second.waiters.begin(); w != it->second.waiters.end();
         ++w) {
      if (w->id == waiter_id) {
        done = std::move(w->done);
        it->second.waiters.erase(w);
        break;
      }
    }
    // (An emptied list stays until its Resolve answers, so that the answer
    // still fills the cache.)
  }
  if (done) {
    done(absl::DeadlineExceededError(absl::StrCat(
        "peer ", address_, " did not resolve '", name,
        "' before the transfer's deadline")));
  }
}

void NameCache::Invalidate(const std::string& name) {
  absl::MutexLock lock(&mu_);
  // Every uid's entry: a failure path, and entries are bounded.
  for (auto age = order_.begin(); age != order_.end();) {
    if (age->second != name) {
      ++age;
      continue;
    }
    entries_.erase(*age);
    age = order_.erase(age);
  }
}

}  // namespace rdmad::peer
