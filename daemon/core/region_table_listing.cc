// RegionTable's listings and totals: a page at a time (Local.ListRegions,
// Peer.ListExports), since a daemon may hold tens of thousands of regions
// and an answer about all of them at once would be large and slow; every
// region (List) and the totals (Totals) for status and metrics.
#include <algorithm>
#include <utility>

#include "daemon/core/region_table.h"

namespace rdmad::core {
namespace {

// Keeps the `limit` smallest of `candidates` by `less`, sorted, and says
// whether any were left out.
template <typename Less>
RegionPage TakeSmallest(std::vector<std::shared_ptr<Region>> candidates,
                        size_t limit, Less less) {
  RegionPage page;
  page.more = candidates.size() > limit;
  if (page.more) {
    std::nth_element(candidates.begin(), candidates.begin() + limit,
                     candidates.end(), less);
    candidates.resize(limit);
  }
  std::sort(candidates.begin(), candidates.end(), less);
  page.regions.reserve(candidates.size());
  // Snapshots outside the table lock: each takes the region's own lock.
  for (const auto& region : candidates) page.regions.push_back(region->Snapshot());
  return page;
}

}  // namespace

RegionPage RegionTable::ListPage(uint64_t after_id, size_t limit) const {
  std::vector<std::shared_ptr<Region>> candidates;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [id, region] : by_id_) {
      if (id > after_id) candidates.push_back(region);
    }
  }
  return TakeSmallest(std::move(candidates), limit,
                      [](const auto& a, const auto& b) {
                        return a->id() < b->id();
                      });
}

std::optional<RegionSnapshot> RegionTable::SnapshotByName(
    const std::string& name) const {
  std::shared_ptr<Region> region;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = by_name_.find(name);
    if (it == by_name_.end()) return std::nullopt;
    region = by_id_.at(it->second);
  }
  return region->Snapshot();
}

RegionPage RegionTable::ListExported(const std::string& after_name,
                                     size_t limit) const {
  std::vector<std::shared_ptr<Region>> candidates;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [name, id] : by_name_) {
      if (name <= after_name) continue;
      const std::shared_ptr<Region>& region = by_id_.at(id);
      if (region->exported().access != RemoteAccess::kNone) {
        candidates.push_back(region);
      }
    }
  }
  return TakeSmallest(std::move(candidates), limit,
                      [](const auto& a, const auto& b) {
                        return a->name() < b->name();
                      });
}

std::vector<RegionSnapshot> RegionTable::List() const {
  std::vector<std::shared_ptr<Region>> regions;
  {
    absl::ReaderMutexLock lock(&mu_);
    regions.reserve(by_id_.size());
    for (const auto& [id, region] : by_id_) regions.push_back(region);
  }
  std::vector<RegionSnapshot> out;
  out.reserve(regions.size());
  for (const auto& region : regions) out.push_back(region->Snapshot());
  std::sort(out.begin(), out.end(),
            [](const RegionSnapshot& a, const RegionSnapshot& b) {
              return a.id < b.id;
            });
  return out;
}

RegionTotals RegionTable::Totals() const {
  absl::ReaderMutexLock lock(&mu_);
  RegionTotals totals;
  totals.count = by_id_.size();
  for (const auto& [id, region] : by_id_) {
    totals.bytes += region->size();
    if (region->kept() != nullptr) {
      ++totals.kept_count;
      totals.kept_bytes += region->size();
    }
  }
  totals.pinned_bytes = pinned_bytes_;
  return totals;
}

}  // namespace rdmad::core
