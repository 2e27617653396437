// RegionTable: every local region of the daemon, by id and by name, with
// ownership and access checks and the pinned-memory budget.
#ifndef RDMAD_DAEMON_CORE_REGION_TABLE_H_
#define RDMAD_DAEMON_CORE_REGION_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "daemon/core/access_control.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/core/region.h"
#include "daemon/core/region_keeper.h"
#include "daemon/core/region_observer.h"
#include "daemon/core/region_releaser.h"

namespace rdmad::core {

// Names a region by id (when non-zero) or else by name.
struct RegionKey {
  uint64_t id = 0;
  std::string name;
};

struct RegionLimits {
  // Most bytes all regions together may hold; 0 = unlimited. See
  // pinned_cap.h for how it is chosen, and `max_pinned_bytes_source` (for
  // messages) for why.
  uint64_t max_pinned_bytes = 0;
  // Largest single region: above this a size is a mistake (physical memory,
  // or the smallest max_mr_size of the devices).
  uint64_t max_region_size = 0;
  // Per-uid quotas, charged to the uid that created a region (session
  // buffers and named regions alike); 0 = no quota. Root is not exempt:
  // a runaway root client can pin memory as well as any other.
  uint64_t max_pinned_bytes_per_uid = 0;  // config quota_pinned_bytes_per_uid
  uint64_t max_regions_per_uid = 0;       // config quota_regions_per_uid
  // Where max_pinned_bytes comes from, in words (for status and errors).
  std::string max_pinned_bytes_source;
  // How long Export and Free wait for accesses under the old export to
  // finish (see Region::SetExport).
  absl::Duration revoke_drain_timeout = kRevokeDrainTimeout;
};

struct AllocateOptions {
  uint64_t size = 0;
  std::string name;          // optional unless daemon_owned
  bool daemon_owned = false;
  RemoteAccess export_access = RemoteAccess::kNone;
  // Daemon-owned regions only: local permission bits (0 = kDefaultRegionMode)
  // and group (unset = the caller's gid); see access_control.h.
  uint32_t mode = 0;
  std::optional<uint32_t> group;
};

// INVALID_ARGUMENT when `options` asks for an export without a name: only
// named regions can be exported (peers resolve them by name). Also checked
// by Allocate and Adopt; the service calls it first where a failure later
// would cost the client its passed descriptor.
absl::Status CheckExportHasName(const AllocateOptions& options);

// What one uid holds, for quotas.
struct UidUsage {
  uint64_t regions = 0;
  uint64_t pinned_bytes = 0;
};

class RegionTable;

// Memory the daemon holds for a uid outside any region (a queue's shared
// segment), counted against the uid's quota_pinned_bytes_per_uid as a
// region of its size is. Not against max_pinned_bytes: that cap is about
// pinning (on a verbs node it is the locked-memory limit), and this memory
// is never pinned. Given back when destroyed (or Release()d). Move-only;
// the RegionTable must outlive it.
class MemoryCharge {
 public:
  MemoryCharge() = default;
  MemoryCharge(MemoryCharge&& other) noexcept { *this = std::move(other); }
  MemoryCharge& operator=(MemoryCharge&& other) noexcept;
  MemoryCharge(const MemoryCharge&) = delete;
  MemoryCharge& operator=(const MemoryCharge&) = delete;
  ~MemoryCharge() { Release(); }

  void Release();
  uint64_t bytes() const { return bytes_; }

 private:
  friend class RegionTable;
  MemoryCharge(RegionTable* table, uint32_t uid, uint64_t bytes)
      : table_(table), uid_(uid), bytes_(bytes) {}
  RegionTable* table_ = nullptr;
  uint32_t uid_ = 0;
  uint64_t bytes_ = 0;
};

// One page of a listing, in the listing's order.
struct RegionPage {
  std::vector<RegionSnapshot> regions;
  bool more = false;  // there are regions after the last one
};

struct RegionTotals {
  uint64_t count = 0;
  uint64_t bytes = 0;         // sum of requested sizes
  uint64_t pinned_bytes = 0;  // sum of mapped sizes
  // Of those, the regions whose memory outlives the daemon (a keeper's).
  uint64_t kept_count = 0;
  uint64_t kept_bytes = 0;
};

// Thread-safe. Regions are handed out as shared_ptr so that a transfer in
// flight keeps its memory alive across a concurrent Free.
class RegionTable {
 public:
  // `registrar` registers memory with the devices. `keeper`, when given,
  // creates the memory of daemon-owned regions so that it outlives the
  // daemon (see region_keeper.h); null: every region ends with the daemon.
  // Neither is owned; both must outlive the table.
  RegionTable(MemoryRegistrar* registrar, RegionLimits limits,
              RegionKeeper* keeper = nullptr);
  ~RegionTable();

  // Tears down the regions an event loop dropped last (region_releaser.h).
  RegionReleaser& releaser() const { return *releaser_; }

  // Creates a daemon-allocated region for `caller`. Session buffers need a
  // session; daemon-owned regions need a name.
  absl::StatusOr<std::shared_ptr<Region>> Allocate(const Caller& caller,
                                                   const AllocateOptions& options);

  // Registers the client's own memfd as a session buffer.
  absl::StatusOr<std::shared_ptr<Region>> Adopt(const Caller& caller,
                                                UniqueFd memfd,
                                                const AllocateOptions& options);

  // Registers `options.size` bytes from `offset` of a client's dma-buf as a
  // session buffer (ShmSegment::AdoptDmabuf): on every device that
  // supports dma-buf, or, on a daemon without RDMA devices, for the TCP
  // transport through the daemon's CPU mapping of it. FAILED_PRECONDITION
  // when this daemon can do neither (dmabuf_policy.h); INVALID_ARGUMENT for
  // a descriptor that is not a dma-buf or a range outside it. The region
  // keeps the descriptor until it is freed.
  absl::StatusOr<std::shared_ptr<Region>> AdoptDmabuf(
      const Caller& caller, UniqueFd dmabuf, uint64_t offset,
      const AllocateOptions& options);

  // Adopts a daemon-owned region that an earlier daemon kept: inserts it
  // under its old name with its owner, group and mode, registers it anew
  // and, if it was exported, exports it again with new keys (new rkeys and
  // a new TCP key, so the earlier run's descriptors stay dead). Charged to
  // its owner's uid but not held to the per-uid quotas (it was admitted
  // when it was created); the locked-memory budget still applies. On error
  // the region is not adopted and `kept` is discarded
  // (KeptRegion::Discard): never half-used.
  absl::StatusOr<std::shared_ptr<Region>> Restore(
      const KeptRegionInfo& info, ShmSegment segment,
      std::unique_ptr<KeptRegion> kept);

  // Frees a region the caller may manage (see CheckManage). A kept region
  // is forgotten by its keeper too. A barrier for its export: when Free
  // returns, no peer access touches the memory any more (Region::SetExport;
  // DEADLINE_EXCEEDED in the pathological case where that wait timed out,
  // the region being freed all the same).
  absl::Status Free(const Caller& caller, const RegionKey& key);

  // Changes the mode and/or group of a daemon-owned region, as chmod/chgrp
  // do for a file: its owner or root only; the group must be one of the
  // caller's (root: any); mode bits other than read/write are refused.
  // Existing mappings keep the access they were given.
  absl::StatusOr<std::shared_ptr<Region>> SetPermissions(
      const Caller& caller, const RegionKey& key, std::optional<uint32_t> mode,
      std::optional<uint32_t> group);

  // Grants or revokes remote access. A new grant gets a new TCP key and a
  // new export registration (rkeys), so earlier ones stop working; the
  // change is a barrier as for Free. `allow` limits the remote principals
  // (null or empty: any); it needs an access to grant.
  absl::StatusOr<std::shared_ptr<Region>> Export(
      const Caller& caller, const RegionKey& key, RemoteAccess access,
      std::shared_ptr<const ExportAccessList> allow = nullptr);

  // A region the caller may use locally with `need` (kLocalRead and/or
  // kLocalWrite of access_control.h): its session's buffers, and named
  // daemon-owned regions whose owner/group/mode grant it (root: all).
  absl::StatusOr<std::shared_ptr<Region>> FindForUse(
      const Caller& caller, const RegionKey& key,
      uint32_t need = kLocalReadWrite) const;

  // An exported region by name, for peers (Peer.Resolve). NOT_FOUND when the
  // name is unknown or not exported: peers learn nothing of local regions.
  absl::StatusOr<std::shared_ptr<Region>> FindExported(
      const std::string& name) const;

  // An exported region by id, for the data transports (the id a peer got
  // from Resolve or a descriptor). NOT_FOUND when the id is unknown or the
  // region is not exported. The caller still checks key, range and access.
  absl::StatusOr<std::shared_ptr<Region>> FindExportedById(uint64_t id) const;

  // Frees all buffers of a session; returns how many.
  size_t FreeSession(uint64_t session_id);

  // Tells `observer` (not owned; null to stop) about every change of a
  // named region's export: export, unexport, free. Set it before regions
  // are made; it must outlive the table's last change.
  void SetObserver(RegionObserver* observer) {
    observer_.store(observer, std::memory_order_release);
  }

  std::vector<RegionSnapshot> List() const;
  // Up to `limit` regions with ids above `after_id`, in id order. O(n) in
  // the number of regions, without copying more than `limit` snapshots.
  RegionPage ListPage(uint64_t after_id, size_t limit) const;
  // The region named `name`, if there is one (for a listing by name).
  std::optional<RegionSnapshot> SnapshotByName(const std::string& name) const;
  // Up to `limit` exported regions with names after `after_name`, in name
  // order (what peers may see: Peer.ListExports).
  RegionPage ListExported(const std::string& after_name, size_t limit) const;
  RegionTotals Totals() const;
  const RegionLimits& limits() const { return limits_; }
  // What `uid` holds now (reservations of allocations in progress included).
  UidUsage UsageOf(uint32_t uid) const;

  // Charges `bytes` of memory held for `caller`'s uid outside any region,
  // or RESOURCE_EXHAUSTED naming the quota it would pass; `what` names the
  // memory in that message ("a queue of 2.1 MiB").
  absl::StatusOr<MemoryCharge> ChargeMemory(const Caller& caller,
                                            uint64_t bytes,
                                            absl::string_view what);

  // Changes whenever a region that FindForUse found could be refused or
  // replaced by the next call: a free (of a region or of a session's
  // buffers) or a permission change. New regions do not change it (a name
  // is taken only while free). A cache of FindForUse results holds while
  // the generation it read before looking up is the current one.
  uint64_t generation() const {
    return generation_.load(std::memory_order_acquire);
  }

 private:
  absl::StatusOr<std::shared_ptr<Region>> Insert(
      const Caller& caller, const AllocateOptions& options, ShmSegment segment,
      std::unique_ptr<KeptRegion> kept, std::optional<RegionAcl> acl,
      bool restoring,
      std::shared_ptr<const ExportAccessList> allow = nullptr);
  // Registers a new region's memory. When the devices refuse it for lack
  // of locked memory while freed regions are still being torn down (their
  // registrations not yet undone, region_releaser.h), waits for those, at
  // most kReleaseWait, and tries once more: a region freed just before
  // leaves its room to the next one, as it did when torn down at once.
  absl::StatusOr<std::unique_ptr<Registration>> Register(
      const ShmSegment& memory, RemoteAccess access);
  // One registration of `memory`: ibv_reg_mr of its mapping, or
  // ibv_reg_dmabuf_mr of a dma-buf.
  absl::StatusOr<std::unique_ptr<Registration>> RegisterOnce(
      const ShmSegment& memory, RemoteAccess access);
  // A session buffer of client memory (Adopt, AdoptDmabuf): reserves its
  // bytes and the caller's quota as Allocate does, then takes the memory
  // with `take` and inserts it; gives the reservation back if `take` fails.
  absl::StatusOr<std::shared_ptr<Region>> AdoptClientMemory(
      const Caller& caller, const AllocateOptions& options,
      absl::FunctionRef<absl::StatusOr<ShmSegment>()> take)
      ABSL_LOCKS_EXCLUDED(mu_);
  static constexpr absl::Duration kReleaseWait = absl::Seconds(10);
  // The memory of a new region: from the keeper for a kept region, else a
  // memfd.
  absl::StatusOr<KeptMemory> NewMemory(const Caller& caller,
                                       const AllocateOptions& options);
  absl::Status CheckNew(const Caller& caller, const AllocateOptions& options)
      const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::shared_ptr<Region>> FindLocked(const RegionKey& key) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  static absl::Status CheckManage(const Caller& caller, const Region& region,
                                  const RegionKey& key);
  absl::Status CheckQuota(const Caller& caller, uint64_t size) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // quota_pinned_bytes_per_uid for `size` more bytes on top of `used`;
  // the refusal says "WHAT would make uid ... : REMEDY, or raise ...".
  absl::Status CheckBytesQuota(uint32_t uid, const UidUsage& used,
                               uint64_t size, absl::string_view what,
                               absl::string_view remedy) const;
  void Uncharge(uint32_t uid, uint64_t regions, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  friend class MemoryCharge;  // gives its bytes back
  void GiveBack(uint32_t uid, uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Tells the observer that `name` changed (no-op for anonymous regions).
  // Call outside mu_.
  void Notify(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);

  // First, so destroyed last: every region the table held is torn down
  // before its releaser's thread is joined.
  const std::shared_ptr<RegionReleaser> releaser_ =
      std::make_shared<RegionReleaser>();
  MemoryRegistrar* const registrar_;  // Not owned.
  const RegionLimits limits_;
  std::atomic<RegionObserver*> observer_{nullptr};  // Not owned.
  RegionKeeper* const keeper_;  // Not owned; may be null.

  // Serializes export and permission changes, so that the record a keeper
  // writes and the state in memory change in the same order.
  absl::Mutex export_mu_;

  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t pinned_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Bytes promised to allocations that are still being set up outside the
  // lock (mapping and registration are slow and must not block lookups).
  uint64_t reserved_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Region>> by_id_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> by_name_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, UidUsage> usage_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> generation_{1};
};

// Text for messages: "region 'cache'" or "region #7".
std::string DescribeKey(const RegionKey& key);

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_REGION_TABLE_H_
