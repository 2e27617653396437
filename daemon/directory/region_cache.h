// RegionCache: this daemon's copy of the cluster directory's region
// entries, kept fresh by an etcd watch, so that look-ups by name on the
// transfer path do not wait for etcd.
//
// Every entry carries its etcd mod revision, and the cache remembers the
// store revision its watch has reached. Updates are ordered by those
// revisions, not by arrival: a direct read that raced a watch event can
// never bring back an older entry or a deleted one.
//
// Vanished entries. An entry can leave etcd while its holder still holds
// the region: etcd restored empty after an outage, a key deleted by someone
// else. Dropping it at once would fail transfers NOT_FOUND until the holder
// publishes it again, so an entry that is deleted (ApplyDelete) or missing
// from a full listing (Reset) is kept as *vanished* and keeps answering
// until the first of:
//   * a newer entry for the name (the holder re-published, or another
//     daemon holds it now), from the watch or a direct read, whatever its
//     revision (a listing from an etcd restored empty restarts them);
//   * etcd says the lease it hung on has ended (DropVanished: the holder
//     is gone, or withdrew it when the lease was revoked);
//   * the holder's lease TTL plus kVanishedSlack has passed: by then a
//     living holder would have published it again.
// A vanished entry still goes to its holder with the same fences, so a
// region that really was freed fails there (NOT_FOUND) and is looked up
// again (directory_route.h); nothing is sent anywhere new.
//
// Example:
//   RegionCache cache(absl::Seconds(10));
//   cache.Reset(listing, /*revision=*/100);   // after a full read
//   cache.ApplyPut(entry_at_101);             // watch events
//   int64_t lease = cache.ApplyDelete("kv", 102);
//   cache.Find("kv");                         // still there, vanished
//   cache.DropVanished("kv", lease);          // etcd: that lease is gone
//   cache.Find("kv");                         // nullopt now
//
// Thread-safe.
#ifndef RDMAD_DAEMON_DIRECTORY_REGION_CACHE_H_
#define RDMAD_DAEMON_DIRECTORY_REGION_CACHE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/core/region_resolver.h"

namespace rdmad::directory {

class RegionCache {
 public:
  // Added to a holder's lease TTL before a vanished entry is dropped: the
  // time a living holder needs to notice and publish again (its reconnect
  // backoff, at most 2 s, and a few round trips to etcd).
  static constexpr absl::Duration kVanishedSlack = absl::Seconds(5);
  // The longest a holder's record may make us keep its vanished entry
  // (the largest directory_lease_ttl_seconds).
  static constexpr absl::Duration kMaxHolderTtl = absl::Seconds(3600);

  using Clock = std::function<absl::Time()>;

  // `default_ttl`: the holder lease TTL assumed for records that state
  // none. `clock` tells the time (tests pass their own).
  explicit RegionCache(
      absl::Duration default_ttl = absl::Seconds(10),
      Clock clock = [] { return absl::Now(); });

  // A full listing taken at store `revision` (the watch starts after it):
  // replaces the entries it lists, keeps the others as vanished, and marks
  // the cache live. `revision` may be lower than before: etcd restored
  // empty starts again from 1.
  void Reset(std::vector<core::DirectoryEntry> entries, int64_t revision);
  // The watch saw `entry` put (its generation.revision = the mod revision).
  void ApplyPut(core::DirectoryEntry entry);
  // The watch saw `name` deleted (or its lease expire) at `revision`: the
  // entry is kept as vanished. Returns the lease the entry hung on, for
  // the caller to ask etcd whether it still lives (0: nothing to ask).
  int64_t ApplyDelete(const std::string& name, int64_t revision);
  // etcd says `lease` has ended: drops `name` if it is still the vanished
  // entry that hung on it.
  void DropVanished(const std::string& name, int64_t lease);
  // The watch has seen everything up to `revision`.
  void Advance(int64_t revision);
  // A direct read at store `revision` found `entry` (or, when nullopt, no
  // entry for `name`). Kept only if that read is newer than what the
  // watch has applied; an older read says nothing the cache does not know.
  // A read of nothing does not drop a vanished entry (its holder may not
  // have re-published yet).
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
  struct Item {
    core::DirectoryEntry entry;
    bool vanished = false;
    absl::Time keep_until = absl::InfiniteFuture();  // when vanished
  };

  void Vanish(Item& item, absl::Time now) const;
  bool Expired(const Item& item, absl::Time now) const {
    return item.vanished && now >= item.keep_until;
  }
  // Drops vanished entries whose time is up.
  void Purge(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration default_ttl_;
  const Clock clock_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Item> entries_ ABSL_GUARDED_BY(mu_);
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  bool live_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace rdmad::directory

#endif  // RDMAD_DAEMON_DIRECTORY_REGION_CACHE_H_
