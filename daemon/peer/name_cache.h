// NameCache: the exported regions of one peer this daemon has resolved, by
// local uid and name, so that only the first transfer to a name pays for
// Peer.Resolve. By uid too: the peer resolves a name for the uid this
// daemon asserts, and its export access list may admit one uid and not
// another, so what one local user resolved never serves another.
//
// Coalescing: while a Resolve for a name is out, later look-ups of that
// name wait for its answer instead of sending their own. Invalidation: an
// entry answers only for the peer incarnation it was resolved under (a
// restarted peer's keys are dead), and a transfer that finds the key stale
// (NOT_FOUND / PERMISSION_DENIED from the peer) drops the name. Entries
// are bounded (kMaxEntries): past that the oldest names are dropped.
// Waiters fail at their own deadlines. Thread-safe.
#ifndef RDMAD_DAEMON_PEER_NAME_CACHE_H_
#define RDMAD_DAEMON_PEER_NAME_CACHE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/transfer.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/runtime/timers.h"

namespace rdmad::peer {

using ResolvedRegion = std::shared_ptr<const core::RemoteRegionInfo>;

// Owned by a shared_ptr (its callbacks hold it).
class NameCache : public std::enable_shared_from_this<NameCache> {
 public:
  static constexpr size_t kMaxEntries = 4096;

  // `connector` and `timers` are not owned and outlive the cache.
  NameCache(std::string address, PeerConnector* connector,
            runtime::Timers* timers);

  // The entry for `name`, resolved for `uid` under `incarnation`, or null.
  ResolvedRegion Find(const std::string& name, uint32_t uid,
                      uint64_t incarnation) const;

  // `done` gets the region named `name` as resolved for `uid` under
  // `incarnation`: from the cache, or from one Peer.Resolve shared with
  // every look-up of the same (uid, name) meanwhile. An answer from another
  // incarnation (the peer restarted since Hello) is UNAVAILABLE.
  // DEADLINE_EXCEEDED at `deadline`.
  void Lookup(const std::string& name, uint32_t uid, uint64_t incarnation,
              absl::Time deadline, Callback<ResolvedRegion> done);

  // Keeps what a Hello answer resolved under `incarnation` (answers of
  // another incarnation and failures are dropped).
  void Insert(uint64_t incarnation, std::vector<ResolvedName> names);

  // Drops `name`, for every uid (its key turned out stale).
  void Invalidate(const std::string& name);

  size_t size() const;

 private:
  struct Waiter {
    uint64_t id = 0;
    uint64_t timer = 0;
    Callback<ResolvedRegion> done;
  };
  struct Pending {
    uint64_t incarnation = 0;
    std::list<Waiter> waiters;
  };

  using Key = std::pair<uint32_t, std::string>;  // uid, name

  void OnResolved(const Key& key, uint64_t incarnation,
                  absl::StatusOr<core::RemoteRegionInfo> result);
  void Expire(const Key& key, uint64_t waiter_id);
  // Keeps `region` under `key`, dropping the oldest past kMaxEntries.
  void Store(const Key& key, ResolvedRegion region)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string address_;
  PeerConnector* const connector_;  // Not owned.
  runtime::Timers* const timers_;   // Not owned.

  mutable absl::Mutex mu_;
  struct Entry {
    ResolvedRegion region;
    std::list<Key>::iterator age;  // in order_
  };
  absl::flat_hash_map<Key, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::list<Key> order_ ABSL_GUARDED_BY(mu_);  // oldest first
  absl::flat_hash_map<Key, Pending> resolving_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_NAME_CACHE_H_
