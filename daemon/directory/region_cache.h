// RegionCache: this daemon's copy of the cluster directory's region
// entries, kept fresh by an etcd watch, so that look-ups by name on the
// transfer path do not wait for etcd.
//
// Every entry carries its etcd mod revision, and the cache remembers the
// store revision its watch has reached. Updates are ordered by those
// revisions, not by arrival: a direct read that raced a watch event can
// never bring back an older entry or a deleted one.
//
// Example:
//   RegionCache cache;
//   cache.Reset(listing, /*revision=*/100);   // after a full read
//   cache.ApplyPut(entry_at_101);             // watch events
//   cache.ApplyDelete("kv", 102);
//   auto hit = cache.Find("kv");              // nullopt now
//
// Thread-safe.
#ifndef RDMAD_DAEMON_DIRECTORY_REGION_CACHE_H_
#define RDMAD_DAEMON_DIRECTORY_REGION_CACHE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/region_resolver.h"

namespace rdmad::directory {

class RegionCache {
 public:
  // Replaces every entry with a full listing taken at store `revision`
  // (the watch starts after it) and marks the cache live.
  void Reset(std::vector<core::DirectoryEntry> entries, int64_t revision);
  // The watch saw `entry` put (its generation.revision = the mod revision).
  void ApplyPut(core::DirectoryEntry entry);
  // The watch saw `name` deleted (or its lease expire) at `revision`.
  void ApplyDelete(const std::string& name, int64_t revision);
  // The watch has seen everything up to `revision`.
  void Advance(int64_t revision);
  // A direct read at store `revision` found `entry` (or, when nullopt, no
  // entry for `name`). Kept only if that read is newer than what the
  // watch has applied; an older read says nothing the cache does not know.
  void Offer(const std::string& name,
             const std::optional<core::DirectoryEntry>& entry,
             int64_t revision);
  // The watch stopped (etcd lost): entries stay and keep answering, but
  // they are no longer known to be current.
  void SetLive(bool live);

  std::optional<core::DirectoryEntry> Find(const std::string& name) const;
  size_t size() const;
  int64_t revision() const;
  bool live() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, core::DirectoryEntry> entries_
      ABSL_GUARDED_BY(mu_);
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  bool live_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace rdmad::directory

#endif  // RDMAD_DAEMON_DIRECTORY_REGION_CACHE_H_
