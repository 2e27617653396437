// RegionResolver: finds which daemon holds an exported region by name alone
// (the cluster directory, daemon/directory/). The core only sees this
// interface, so it stays free of etcd and gRPC.
#ifndef RDMAD_DAEMON_CORE_REGION_RESOLVER_H_
#define RDMAD_DAEMON_CORE_REGION_RESOLVER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/core/memory_registrar.h"

namespace rdmad::core {

// Which publication of a name an entry is: the publishing daemon's
// incarnation and the store's revision of the entry. A re-export, a move to
// another daemon or a restart of the holder all give a new generation.
struct DirectoryGeneration {
  uint64_t incarnation = 0;
  int64_t revision = 0;

  bool operator==(const DirectoryGeneration&) const = default;
  bool empty() const { return incarnation == 0 && revision == 0; }
};

// One exported region as the directory lists it.
struct DirectoryEntry {
  std::string name;
  std::string node;  // HOST:PORT of the holder's Peer service
  uint64_t size = 0;
  RemoteAccess access = RemoteAccess::kNone;
  uint64_t region_id = 0;  // the holder's id of the region
  DirectoryGeneration generation;
  int64_t create_revision = 0;
  absl::Time exported;  // when the holder exported it (its clock)
  // The holder's certificate identity as its record names it; empty when
  // the record names none (core/holder_trust.h decides what that means).
  std::string identity;
  // The store's lease the entry hangs on (0: none), and the holder's lease
  // TTL as its record states it (zero: not stated): how long a cache keeps
  // the entry after it vanished while the holder may still be alive.
  int64_t lease = 0;
  absl::Duration holder_ttl;
};

using ResolveDone = std::function<void(absl::StatusOr<DirectoryEntry>)>;

class RegionResolver {
 public:
  virtual ~RegionResolver() = default;
  // Looks `name` up. Answers from the local cache when it has an entry
  // whose generation is not `stale` (pass an empty one for "any"); else
  // asks the store, bounded by `deadline`. `done` runs exactly once, inline
  // on a cache hit, else on a gRPC thread; never blocks the caller.
  // NOT_FOUND: no daemon exports it; UNAVAILABLE: the store is unreachable.
  virtual void Resolve(const std::string& name, absl::Time deadline,
                       DirectoryGeneration stale, ResolveDone done) = 0;
  // HOST:PORT of this daemon as entries name it (to recognize its own).
  virtual std::string self_node() const = 0;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_REGION_RESOLVER_H_
