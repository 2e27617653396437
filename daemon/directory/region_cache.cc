#include "daemon/directory/region_cache.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"

namespace rdmad::directory {

RegionCache::RegionCache(absl::Duration default_ttl, Clock clock)
    : default_ttl_(default_ttl), clock_(std::move(clock)) {}

void RegionCache::Vanish(Item& item, absl::Time now) const {
  if (item.vanished) return;
  absl::Duration ttl = item.entry.holder_ttl > absl::ZeroDuration()
                           ? item.entry.holder_ttl
                           : default_ttl_;
  item.vanished = true;
  item.keep_until = now + std::min(ttl, kMaxHolderTtl) + kVanishedSlack;
}

void RegionCache::Purge(absl::Time now) {
  absl::erase_if(entries_,
                 [&](const auto& kv) { return Expired(kv.second, now); });
}

void RegionCache::Reset(std::vector<core::DirectoryEntry> entries,
                        int64_t revision) {
  const absl::Time now = clock_();
  absl::MutexLock lock(&mu_);
  absl::flat_hash_set<std::string> listed;
  for (auto& entry : entries) {
    std::string name = entry.name;
    listed.insert(name);
    entries_[std::move(name)] = Item{std::move(entry)};
  }
  // Not listed: gone from etcd, but maybe not from its holder (see the
  // header). Kept until the holder says otherwise or its time is up.
  for (auto& [name, item] : entries_) {
    if (!listed.contains(name)) Vanish(item, now);
  }
  Purge(now);
  revision_ = revision;
  live_ = true;
}

void RegionCache::ApplyPut(core::DirectoryEntry entry) {
  absl::MutexLock lock(&mu_);
  revision_ = std::max(revision_, entry.generation.revision);
  auto it = entries_.find(entry.name);
  if (it != entries_.end() && !it->second.vanished &&
      it->second.entry.generation.revision >= entry.generation.revision) {
    return;  // already have this one or a newer one
  }
  std::string name = entry.name;
  entries_[std::move(name)] = Item{std::move(entry)};
}

int64_t RegionCache::ApplyDelete(const std::string& name, int64_t revision) {
  const absl::Time now = clock_();
  absl::MutexLock lock(&mu_);
  revision_ = std::max(revision_, revision);
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second.vanished ||
      it->second.entry.generation.revision >= revision) {
    return 0;
  }
  Vanish(it->second, now);
  const int64_t lease = it->second.entry.lease;
  Purge(now);
  return lease;
}

void RegionCache::DropVanished(const std::string& name, int64_t lease) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(name);
  if (it != entries_.end() && it->second.vanished &&
      it->second.entry.lease == lease) {
    entries_.erase(it);
  }
}

void RegionCache::Advance(int64_t revision) {
  absl::MutexLock lock(&mu_);
  revision_ = std::max(revision_, revision);
}

void RegionCache::Offer(const std::string& name,
                        const std::optional<core::DirectoryEntry>& entry,
                        int64_t revision) {
  absl::MutexLock lock(&mu_);
  if (revision <= revision_) return;
  auto it = entries_.find(name);
  if (!entry.has_value()) {
    // Gone as of `revision`, later than anything the watch told us; a
    // vanished entry waits for its holder instead.
    if (it != entries_.end() && !it->second.vanished) entries_.erase(it);
    return;
  }
  if (it != entries_.end() && !it->second.vanished &&
      it->second.entry.generation.revision >= entry->generation.revision) {
    return;
  }
  entries_[name] = Item{*entry};
}

void RegionCache::SetLive(bool live) {
  absl::MutexLock lock(&mu_);
  live_ = live;
}

std::optional<core::DirectoryEntry> RegionCache::Find(
    const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  // The clock only for a vanished entry: the common hit reads no time.
  if (it->second.vanished && Expired(it->second, clock_())) return std::nullopt;
  return it->second.entry;
}

size_t RegionCache::size() const {
  const absl::Time now = clock_();
  absl::MutexLock lock(&mu_);
  return static_cast<size_t>(
      std::count_if(entries_.begin(), entries_.end(),
                    [&](const auto& kv) { return !Expired(kv.second, now); }));
}

int64_t RegionCache::revision() const {
  absl::MutexLock lock(&mu_);
  return revision_;
}

bool RegionCache::live() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

}  // namespace rdmad::directory
