// TransferEngine: turns decoded transfer requests (TransferSpec) into
// checked transfers (Transfer) and runs them.
//
// The engine is the one place that checks a request against the tables:
// the caller may use the local region with the access the operation needs,
// the local range lies inside it, and the caller's uid has room in its
// in-flight quota. Everything else goes to the peer layer (RemoteTransfers)
// in one batch per call, which trusts what the engine checked. A name that
// is not a region here goes through the cluster directory, when there is
// one (directory_route.h).
//
// A batch is checked as a whole where that costs less and changes nothing
// a caller can tell: one clock reading starts all its transfers, and the
// copies it serves inline complete together when the batch has run (their
// latency is the batch's); the caller's quota slots are taken from the
// shared table once for what the batch holds at its peak (one slot per
// remote transfer, one reused by every inline copy) and the unused ones
// given back at its end; a region named again by the next transfer is not
// looked up again. Each transfer is still checked in full, in order.
//
// A caller that runs many small copies to regions of this daemon (a ring
// engine) has them checked and copied one at a time with CopyNow: the same
// checks in the same order, without a callback or an allocation.
//
// A target on this same daemon is served as a memory copy, and the caller
// is a local user there: no route to this daemon gives it more than the
// region's own permissions (owner, group, mode) do.
//   - By name (empty peer): the region's permissions decide, as they would
//     for mapping it; an export is not needed (it grants peers, not local
//     users).
//   - By a descriptor this daemon issued (TransferTarget::self_region_id,
//     service/self_route.h): the descriptor's export must still be the
//     current one, with the access needed, and the permissions must grant
//     it too. The copy runs chunk by chunk under ExportUses, so that an
//     unexport or free waits for at most one chunk (Region::SetExport).
#ifndef RDMAD_DAEMON_CORE_TRANSFER_ENGINE_H_
#define RDMAD_DAEMON_CORE_TRANSFER_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/tick_clock.h"
#include "daemon/core/notification_sink.h"
#include "daemon/core/region_resolver.h"
#include "daemon/core/region_table.h"
#include "daemon/core/transfer.h"
#include "daemon/core/transfer_observer.h"

namespace rdmad::core {

// Moves data to and from other daemons. Implemented by the peer layer.
class RemoteTransfers {
 public:
  virtual ~RemoteTransfers() = default;
  // Takes every transfer of `transfers` (moved from) and runs each one's
  // `done` exactly once, from any thread, no later than shortly after its
  // deadline. Transfers of one batch to the same peer are handed to its
  // data channel together.
  virtual void SubmitBatch(absl::Span<Transfer> transfers) = 0;
};

struct TransferCounters {
  uint64_t ops_ok = 0;
  uint64_t ops_failed = 0;
  uint64_t bytes_written = 0;
  uint64_t bytes_read = 0;
};

struct TransferLimits {
  // Most transfers one uid may have in flight (batch operations count one
  // each); 0 = no quota. Config quota_transfers_per_uid.
  uint64_t max_in_flight_per_uid = 0;
};

// The region looked up last for one purpose: the next transfer naming the
// same region with the same need uses it without a look-up, and without
// touching a reference count (a copy to a region of this daemon costs a
// ring operation about 270 ns, and four atomic operations on the regions'
// counts were a sixth of it). It holds the region, so whoever keeps a cache
// across batches forgets what went stale (TransferEngine::ForgetStale) when
// the table's generation moves, also while no transfer uses the cache, and
// clears it when idle: a freed region's memory must not stay mapped or
// registered for long (RingEngine does both).
struct CachedRegion {
  uint64_t id = 0;
  std::string name;
  uint32_t need = 0;
  std::shared_ptr<Region> region;  // null: nothing cached
};
// What one caller's batches looked up: within a batch, and across batches
// while RegionTable::generation() is the one the cache was filled under
// (a queue keeps one, so a steady stream of ops to the same regions skips
// the table's lock and hash look-ups). For one caller, used by one thread
// at a time.
struct RegionCache {
  uint64_t generation = 0;  // 0: never filled
  CachedRegion local;   // the local region looked up last
  CachedRegion target;  // the target on this daemon looked up last by name
};
// RegionTable::FindForUse through `cache` (which keeps only successes). The
// region stays valid while `cache` holds it.
absl::StatusOr<Region*> FindCachedSlow(const RegionTable& regions,
                                       const Caller& caller, uint64_t id,
                                       const std::string& name, uint32_t need,
                                       CachedRegion& cache);
// Inline: a steady stream of operations hits the cache every time.
inline absl::StatusOr<Region*> FindCached(const RegionTable& regions,
                                          const Caller& caller, uint64_t id,
                                          const std::string& name,
                                          uint32_t need, CachedRegion& cache) {
  if (cache.region != nullptr && cache.id == id && cache.need == need &&
      cache.name == name) {
    return cache.region.get();
  }
  return FindCachedSlow(regions, caller, id, name, need, cache);
}

// One request of a batch: what was asked and whom to tell.
struct TransferRequest {
  TransferSpec spec;
  TransferDone done;
};

// Thread-safe.
class TransferEngine {
 public:
  // Not owned; `remote` may be null (then remote targets fail
  // FAILED_PRECONDITION: a daemon always has one, tests may not).
  TransferEngine(RegionTable* regions, RemoteTransfers* remote,
                 TransferLimits limits = {});

  // Checks and starts every request of `requests` (moved from) for
  // `caller`. Each `done` runs exactly once, possibly before this returns
  // (local copies and failed checks complete inline). `start`: when the
  // batch was taken, from a clock reading the caller made anyway (a ring
  // engine's turn); InfinitePast: read the clock.
  // `cache`: the caller's region cache, kept across its batches (null: one
  // for this batch only); every request of the batch is `caller`'s.
  void SubmitBatch(const Caller& caller, absl::Span<TransferRequest> requests,
                   absl::Time start = absl::InfinitePast(),
                   RegionCache* cache = nullptr);
  // One request.
  void Submit(const Caller& caller, TransferSpec spec, TransferDone done);
  // Checks and copies `request` on the calling thread, now, exactly as
  // SubmitBatch checks and copies a request whose target is on this daemon
  // (the same checks in the same order, one quota slot while it runs), and
  // reports it as SubmitBatch does; returns what SubmitBatch's `done` would
  // have been given. nullopt, with nothing done or reported: the target is
  // a name with no region here and there is a cluster directory to ask;
  // SubmitBatch it. `start`: when the caller took the request, on the tick
  // clock (the result's latency runs from it; absl::Now() would cost more
  // than the copy); `cache` as for SubmitBatch.
  // No callback and no allocation: for callers of many small copies.
  std::optional<absl::StatusOr<TransferResult>> CopyNow(
      const Caller& caller, const LocalCopyRequest& request,
      TickClock::Ticks start, RegionCache& cache);
  // CopyNow in two steps, for a caller that completes the operation before
  // it accounts for it (the counters and the observer's metrics take locks
  // and atomics, which then delay no completion): CopyUnreported is
  // CopyNow without the report, and ReportCopy(request.op, result) must
  // follow for every result it returned.
  std::optional<absl::StatusOr<TransferResult>> CopyUnreported(
      const Caller& caller, const LocalCopyRequest& request,
      TickClock::Ticks start, RegionCache& cache);
  void ReportCopy(OpType op, const absl::StatusOr<TransferResult>& result);

  // The region table's generation (RegionTable::generation): one load.
  uint64_t regions_generation() const { return regions_->generation(); }
  // Lets go of what `cache` holds if the generation moved since it was
  // filled (a free or a permission change): what a cache kept across
  // batches must do when the generation moves, transfers or not, so that a
  // freed region's memory goes (CachedRegion).
  void ForgetStale(RegionCache& cache) const;

  TransferCounters counters() const;

  // Reports every finished transfer to `observer` (not owned; null to stop).
  // Set it before the first Submit; it must outlive the engine's last
  // transfer.
  void SetObserver(TransferObserver* observer) {
    observer_.store(observer, std::memory_order_release);
  }
  // Resolves names that are not exported here through the cluster
  // directory (not owned; null: none), sending only to holders `trust`
  // trusts (not owned; null: every holder). Set before the first Submit;
  // both must outlive the engine's last transfer.
  void SetDirectory(RegionResolver* directory,
                    const HolderTrust* trust = nullptr) {
    holder_trust_.store(trust, std::memory_order_release);
    directory_.store(directory, std::memory_order_release);
  }
  // Told of every local WRITE with an immediate (not owned; null: nobody).
  // Set before the first Submit.
  void SetNotificationSink(NotificationSink* sink) { notifications_ = sink; }
  // Transfers of `uid` in flight now, as the quota counts them: always 0
  // without a quota (max_in_flight_per_uid 0), where nothing is counted.
  uint64_t InFlight(uint32_t uid) const;

 private:
  struct Batch;   // one SubmitBatch call's state (transfer_engine.cc)
  struct Inline;  // a transfer served or refused inline, to report

  // Checks `request` and returns the Transfer (holding one of the batch's
  // quota slots), or the reason it fails.
  absl::StatusOr<Transfer> Check(Batch& batch, TransferRequest& request);
  // The caller's own region of a transfer (by id, or by name), with the
  // access `op` needs of it, found through `cache`, and [offset,
  // offset+length) inside it.
  // Valid while `cache` holds it (cache.region).
  absl::StatusOr<Region*> FindLocalRegion(const Caller& caller, OpType op,
                                          uint64_t id, const std::string& name,
                                          uint64_t offset, uint64_t length,
                                          CachedRegion& cache);
  // For a target on this daemon named by name: the region, found through
  // `cache` with the access `op` needs of it; null for a self-routed
  // descriptor (CopyLocal finds that one). When the name is not a region
  // here and `directory` is not null, sets *by_directory instead: the
  // cluster may know it.
  absl::StatusOr<Region*> FindLocalTarget(const Caller& caller, OpType op,
                                          const TransferTarget& target,
                                          CachedRegion& cache,
                                          RegionResolver* directory,
                                          bool* by_directory);
  // Copies between `local` (checked: the caller may use it, the local
  // range is inside it) and the target of `request`, a region of this
  // daemon. `by_name`: the target when named (FindLocalTarget), else null
  // (a self-routed descriptor).
  absl::StatusOr<uint64_t> CopyLocal(const Caller& caller,
                                     const LocalCopyRequest& request,
                                     const Region& local, Region* by_name);
  // CopyLocal to a self-routed descriptor's region.
  absl::StatusOr<uint64_t> CopyThroughExport(const Caller& caller,
                                             const LocalCopyRequest& request,
                                             const Region& local);
  // Moves `n` bytes `at` bytes into both ranges of `request`, in its
  // direction.
  static absl::Status MoveBytes(const LocalCopyRequest& request,
                                const Region& local, Region& target,
                                uint64_t at, uint64_t n);
  // After a copy: the target's owner hears of a WRITE's immediate (from
  // `caller`); the bytes moved.
  uint64_t NotifyCopied(const Caller& caller, const LocalCopyRequest& request,
                        Region& target);
  // The checks and the copy of CopyNow, without quota and report.
  std::optional<absl::StatusOr<uint64_t>> CheckAndCopy(
      const Caller& caller, const LocalCopyRequest& request,
      RegionCache& cache);
  // Counts a finished transfer and tells the observer.
  void Report(OpType op, const std::string& peer,
              const absl::StatusOr<TransferResult>& result);
  // Reports a finished transfer, gives its quota slot back when `charged`,
  // and runs `done`.
  void Finish(OpType op, const std::string& peer, uint32_t uid, bool charged,
              absl::StatusOr<TransferResult> result, TransferDone& done);
  // Takes up to `n` in-flight slots of `uid`'s quota at once: the number
  // taken. Acquire takes one (RESOURCE_EXHAUSTED, saying so, if none is
  // left); Release gives `n` back.
  uint64_t AcquireUpTo(uint32_t uid, uint64_t n);
  absl::Status Acquire(uint32_t uid);
  void Release(uint32_t uid, uint64_t n = 1);

  RegionTable* const regions_;       // Not owned.
  RemoteTransfers* const remote_;    // Not owned; may be null.
  const TransferLimits limits_;
  std::atomic<TransferObserver*> observer_{nullptr};  // Not owned.
  std::atomic<RegionResolver*> directory_{nullptr};   // Not owned.
  std::atomic<const HolderTrust*> holder_trust_{nullptr};  // Not owned.
  NotificationSink* notifications_ = nullptr;         // Not owned.

  // Relaxed: each is a count of its own, read for reports.
  std::atomic<uint64_t> ops_ok_{0};
  std::atomic<uint64_t> ops_failed_{0};
  std::atomic<uint64_t> bytes_written_{0};
  std::atomic<uint64_t> bytes_read_{0};

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, uint64_t> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_TRANSFER_ENGINE_H_
