#include "daemon/directory/region_cache.h"

#include <algorithm>
#include <utility>

namespace rdmad::directory {

void RegionCache::Reset(std::vector<core::DirectoryEntry> entries,
                        int64_t revision) {
  absl::MutexLock lock(&mu_);
  entries_.clear();
  for (auto& entry : entries) {
    std::string name = entry.name;
    entries_[std::move(name)] = std::move(entry);
  }
  revision_ = revision;
  live_ = true;
}

void RegionCache::ApplyPut(core::DirectoryEntry entry) {
  absl::MutexLock lock(&mu_);
  revision_ = std::max(revision_, entry.generation.revision);
  auto it = entries_.find(entry.name);
  if (it != entries_.end() &&
      it->second.generation.revision >= entry.generation.revision) {
    return;  // already have this one or a newer one
  }
  std::string name = entry.name;
  entries_[std::move(name)] = std::move(entry);
}

void RegionCache::ApplyDelete(const std::string& name, int64_t revision) {
  absl::MutexLock lock(&mu_);
  revision_ = std::max(revision_, revision);
  auto it = entries_.find(name);
  if (it != entries_.end() && it->second.generation.revision < revision) {
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
    // Gone as of `revision`, later than anything the watch told us.
    if (it != entries_.end()) entries_.erase(it);
    return;
  }
  if (it != entries_.end() &&
      it->second.generation.revision >= entry->generation.revision) {
    return;
  }
  entries_[name] = *entry;
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
  return it->second;
}

size_t RegionCache::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
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
