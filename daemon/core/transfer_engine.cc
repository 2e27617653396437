#include "daemon/core/transfer_engine.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/size.h"
#include "daemon/core/access_control.h"
#include "daemon/core/directory_route.h"
#include "daemon/core/region_copy.h"

// The layers of a ring's local copy (CheckAndCopy and what it calls) are
// forced inline into CopyUnreported: their calls and StatusOr hand-offs
// were a third of its instructions (callgrind, rdmad_ring_engine_bench
// --batch 1: 418 -> 270 per operation).
namespace rdmad::core {
namespace {

// A copy to a descriptor-routed region moves this much per ExportUse, so
// that a revocation of its export waits for at most one chunk, not for a
// whole large copy.
constexpr uint64_t kCopyChunk = 1ull << 20;

// Why a range does not fit (CheckRange's slow half, out of the way).
ABSL_ATTRIBUTE_NOINLINE absl::Status RangeError(const char* what,
                                                const std::string& region_name,
                                                uint64_t size, uint64_t offset,
                                                uint64_t length) {
  if (length == 0) {
    return absl::InvalidArgumentError(
        "transfer length is 0: move at least one byte");
  }
  return absl::OutOfRangeError(absl::StrCat(
      what, " range [", offset, ", ", offset, "+", length, ") does not fit in ",
      region_name.empty() ? "the region"
                          : absl::StrCat("region '", region_name, "'"),
      " of ", size, " bytes"));
}

inline absl::Status CheckRange(const char* what, const std::string& region_name,
                               uint64_t size, uint64_t offset,
                               uint64_t length) {
  if (ABSL_PREDICT_TRUE(RangeInside(size, offset, length))) {
    return absl::OkStatus();
  }
  return RangeError(what, region_name, size, offset, length);
}

// What an operation needs of the caller's own region: a WRITE sends its
// bytes (reads them), a READ lands bytes in it.
uint32_t LocalNeed(OpType op) {
  return op == OpType::kWrite ? kLocalRead : kLocalWrite;
}
// What it needs of a target on this daemon: read by a READ, written by a
// WRITE.
uint32_t TargetNeed(OpType op) {
  return op == OpType::kWrite ? kLocalWrite : kLocalRead;
}

// Empties `cache` if the table changed since it was filled. Read before any
// look-up: a cache filled under this generation is valid for it (a change
// after the read bumps it for the next use).
void Revalidate(const RegionTable& regions, RegionCache& cache) {
  if (const uint64_t generation = regions.generation();
      cache.generation != generation) {
    cache = RegionCache{.generation = generation};
  }
}

// A checked transfer to a region of this daemon, as CopyLocal takes it.
LocalCopyRequest LocalCopyOf(const Transfer& transfer) {
  LocalCopyRequest request;
  request.op = transfer.op;
  request.local_id = transfer.local->id();
  request.local_offset = transfer.local_offset;
  request.target = &transfer.remote;
  request.target_offset = transfer.remote.offset;
  request.length = transfer.length;
  request.immediate = transfer.immediate;
  return request;
}

// An empty name, without building one per operation: the peer of a
// transfer within this daemon, and the name of a region a ring names by id.
const std::string& NoName() {
  static const std::string* const none = new std::string();
  return *none;
}

}  // namespace

absl::StatusOr<Region*> FindCachedSlow(const RegionTable& regions,
                                       const Caller& caller, uint64_t id,
                                       const std::string& name, uint32_t need,
                                       CachedRegion& cache) {
  auto found = regions.FindForUse(caller, RegionKey{id, name}, need);
  if (!found.ok()) return found.status();
  cache.id = id;
  cache.name = name;
  cache.need = need;
  cache.region = *std::move(found);
  return cache.region.get();
}

std::string RemoteRegionLabel(const RemoteRegionInfo& region) {
  return region.name.empty() ? absl::StrCat("region #", region.region_id)
                             : absl::StrCat("region '", region.name, "'");
}

TransferEngine::TransferEngine(RegionTable* regions, RemoteTransfers* remote,
                               TransferLimits limits)
    : regions_(regions), remote_(remote), limits_(limits) {}

void TransferEngine::ForgetStale(RegionCache& cache) const {
  Revalidate(*regions_, cache);
}

void TransferEngine::Submit(const Caller& caller, TransferSpec spec,
                            TransferDone done) {
  TransferRequest request{std::move(spec), std::move(done)};
  SubmitBatch(caller, absl::MakeSpan(&request, 1));
}

// One SubmitBatch call.
struct TransferEngine::Batch {
  const Caller& caller;
  const absl::Time start;  // every transfer's start
  // Quota slots taken from the table that no transfer holds: an inline
  // copy, or a check that failed, puts its slot back here for the next
  // transfer; what is left goes back to the table at the end.
  uint64_t spare_slots = 0;
  RegionCache& regions;  // the caller's, or one for this batch
};

// What a transfer served (or refused) inline reports when the batch ends.
struct TransferEngine::Inline {
  OpType op;
  std::string peer;
  absl::StatusOr<uint64_t> bytes;
  TransferDone done;
};

void TransferEngine::SubmitBatch(const Caller& caller,
                                 absl::Span<TransferRequest> requests,
                                 absl::Time start, RegionCache* cache) {
  RegionCache for_this_batch;
  Batch batch{caller, start == absl::InfinitePast() ? absl::Now() : start,
              0, cache != nullptr ? *cache : for_this_batch};
  Revalidate(*regions_, batch.regions);
  // The most slots the batch holds at once: one per remote transfer (held
  // until it completes), and one that the inline copies use in turn.
  uint64_t peak = 0;
  bool any_local = false;
  for (const TransferRequest& request : requests) {
    if (request.spec.remote.is_local()) {
      any_local = true;
    } else {
      ++peak;
    }
  }
  batch.spare_slots = AcquireUpTo(caller.uid, peak + (any_local ? 1 : 0));

  absl::InlinedVector<Transfer, 1> remote;  // one at a time: no allocation
  absl::InlinedVector<Inline, 16> inline_done;
  RegionResolver* directory = directory_.load(std::memory_order_acquire);
  for (TransferRequest& request : requests) {
    absl::StatusOr<Transfer> checked = Check(batch, request);
    if (!checked.ok()) {
      inline_done.push_back({request.spec.op,
                             std::move(request.spec.remote.peer),
                             checked.status(), std::move(request.done)});
      continue;
    }
    Transfer& transfer = *checked;
    bool by_directory = false;
    if (transfer.remote.is_local()) {
      // A target named here: a copy. A name with no region here is looked
      // for in the cluster, when there is a directory.
      absl::StatusOr<Region*> target =
          FindLocalTarget(caller, transfer.op, transfer.remote,
                          batch.regions.target, directory, &by_directory);
      if (!by_directory) {
        absl::StatusOr<uint64_t> copied =
            target.ok() ? CopyLocal(caller, LocalCopyOf(transfer),
                                    *transfer.local, *target)
                        : absl::StatusOr<uint64_t>(target.status());
        ++batch.spare_slots;
        inline_done.push_back({transfer.op, std::move(transfer.remote.peer),
                               std::move(copied), std::move(transfer.done)});
        continue;
      }
    }
    // Accounting happens when the peer layer finishes it.
    transfer.done = [this, op = transfer.op, peer = transfer.remote.peer,
                     uid = caller.uid, done = std::move(transfer.done)](
                        absl::StatusOr<TransferResult> result) mutable {
      Finish(op, peer, uid, true, std::move(result), done);
    };
    if (by_directory) {
      RouteThroughDirectory(directory,
                            holder_trust_.load(std::memory_order_acquire),
                            remote_, std::move(transfer));
      continue;
    }
    remote.push_back(std::move(transfer));
  }
  if (!remote.empty()) remote_->SubmitBatch(absl::MakeSpan(remote));
  // Slots back before anyone hears of a completion: a caller that submits
  // again on hearing finds them free.
  if (batch.spare_slots > 0) Release(caller.uid, batch.spare_slots);
  if (inline_done.empty()) return;
  const absl::Duration latency = absl::Now() - batch.start;
  for (Inline& served : inline_done) {
    absl::StatusOr<TransferResult> result =
        served.bytes.ok()
            ? absl::StatusOr<TransferResult>(TransferResult{
                  *served.bytes, TransportKind::kLocal, latency})
            : absl::StatusOr<TransferResult>(served.bytes.status());
    Finish(served.op, served.peer, caller.uid, false, std::move(result),
           served.done);
  }
}

absl::StatusOr<Transfer> TransferEngine::Check(Batch& batch,
                                               TransferRequest& request) {
  const TransferSpec& spec = request.spec;
  if (batch.spare_slots > 0) {
    --batch.spare_slots;
  } else {
    RDMAD_RETURN_IF_ERROR(Acquire(batch.caller.uid));
  }
  // The slot is the batch's now: a failed check gives it back.
  auto fail = [&batch](absl::Status status) {
    ++batch.spare_slots;
    return status;
  };
  if (!spec.remote.is_local() && remote_ == nullptr) {
    return fail(absl::FailedPreconditionError(
        "this daemon has no data transport to other daemons"));
  }
  auto local = FindLocalRegion(batch.caller, spec.op, spec.local.id,
                               spec.local.name, spec.local_offset,
                               spec.length, batch.regions.local);
  if (!local.ok()) return fail(local.status());
  Transfer t;
  t.op = spec.op;
  // The transfer holds its region while in flight, whatever the cache does.
  t.local = batch.regions.local.region;
  t.local_offset = spec.local_offset;
  t.length = spec.length;
  t.remote = std::move(request.spec.remote);
  t.deadline = spec.deadline;
  t.immediate = spec.immediate;
  t.uid = batch.caller.uid;
  t.start = batch.start;
  t.done = std::move(request.done);
  return t;
}

std::optional<absl::StatusOr<TransferResult>> TransferEngine::CopyNow(
    const Caller& caller, const LocalCopyRequest& request,
    TickClock::Ticks start, RegionCache& cache) {
  std::optional<absl::StatusOr<TransferResult>> result =
      CopyUnreported(caller, request, start, cache);
  if (result.has_value()) ReportCopy(request.op, *result);
  return result;
}

void TransferEngine::ReportCopy(OpType op,
                                const absl::StatusOr<TransferResult>& result) {
  Report(op, NoName(), result);
}

std::optional<absl::StatusOr<TransferResult>> TransferEngine::CopyUnreported(
    const Caller& caller, const LocalCopyRequest& request,
    TickClock::Ticks start, RegionCache& cache) {
  // The one slot an inline copy of a batch holds while it runs (none to
  // take without a quota: not even a call).
  const bool counted = limits_.max_in_flight_per_uid != 0;
  if (counted) {
    if (absl::Status quota = Acquire(caller.uid); !quota.ok()) {
      return absl::StatusOr<TransferResult>(std::move(quota));
    }
  }
  std::optional<absl::StatusOr<uint64_t>> copied =
      CheckAndCopy(caller, request, cache);
  if (counted) Release(caller.uid);
  if (!copied.has_value()) return std::nullopt;
  if (!copied->ok()) return absl::StatusOr<TransferResult>(copied->status());
  return absl::StatusOr<TransferResult>(
      TransferResult{**copied, TransportKind::kLocal, TickClock::Since(start)});
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline std::optional<absl::StatusOr<uint64_t>>
TransferEngine::CheckAndCopy(const Caller& caller,
                             const LocalCopyRequest& request,
                             RegionCache& cache) {
  // As SubmitBatch and Check do, in their order.
  Revalidate(*regions_, cache);
  auto local =
      FindLocalRegion(caller, request.op, request.local_id, NoName(),
                      request.local_offset, request.length, cache.local);
  if (!local.ok()) return local.status();
  bool by_directory = false;
  absl::StatusOr<Region*> target = FindLocalTarget(
      caller, request.op, *request.target, cache.target,
      directory_.load(std::memory_order_acquire), &by_directory);
  if (by_directory) return std::nullopt;
  if (!target.ok()) return target.status();
  return CopyLocal(caller, request, **local, *target);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::StatusOr<Region*>
TransferEngine::FindLocalRegion(const Caller& caller, OpType op, uint64_t id,
                                const std::string& name, uint64_t offset,
                                uint64_t length, CachedRegion& cache) {
  auto local = FindCached(*regions_, caller, id, name, LocalNeed(op), cache);
  if (!local.ok()) return local.status();
  RDMAD_RETURN_IF_ERROR(
      CheckRange("local", (*local)->name(), (*local)->size(), offset, length));
  return local;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::StatusOr<Region*>
TransferEngine::FindLocalTarget(const Caller& caller, OpType op,
                                const TransferTarget& target,
                                CachedRegion& cache, RegionResolver* directory,
                                bool* by_directory) {
  *by_directory = false;
  if (target.self_region_id != 0 || target.name.empty()) return nullptr;
  auto found =
      FindCached(*regions_, caller, 0, target.name, TargetNeed(op), cache);
  if (!found.ok() && directory != nullptr && absl::IsNotFound(found.status())) {
    *by_directory = true;
  }
  return found;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::StatusOr<uint64_t>
TransferEngine::CopyLocal(const Caller& caller, const LocalCopyRequest& request,
                          const Region& local, Region* by_name) {
  if (request.target->self_region_id != 0) {
    return CopyThroughExport(caller, request, local);
  }
  // By name: the caller found the region with the permissions it needs.
  if (by_name == nullptr) {
    return absl::InvalidArgumentError("no target region named");
  }
  Region& region = *by_name;
  RDMAD_RETURN_IF_ERROR(CheckRange("remote", region.name(), region.size(),
                                   request.target_offset, request.length));
  RDMAD_RETURN_IF_ERROR(MoveBytes(request, local, region, 0, request.length));
  return NotifyCopied(caller, request, region);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status TransferEngine::MoveBytes(
    const LocalCopyRequest& request, const Region& local, Region& target,
    uint64_t at, uint64_t n) {
  // The two ranges may be the same region; memory a client could truncate
  // is copied without risking SIGBUS (region_copy.h).
  return request.op == OpType::kWrite
             ? CopyRegionBytes(target, request.target_offset + at, local,
                               request.local_offset + at, n)
             : CopyRegionBytes(local, request.local_offset + at, target,
                               request.target_offset + at, n);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline uint64_t TransferEngine::NotifyCopied(
    const Caller& caller, const LocalCopyRequest& request, Region& target) {
  if (request.op == OpType::kWrite && request.immediate.has_value() &&
      notifications_ != nullptr) {
    // The data is in place: the WRITE succeeded whatever becomes of its
    // notification (the sink holds it until the owner has room).
    notifications_->Notify(
        target, request.target_offset, request.length, *request.immediate,
        NotificationWriter{.transport = TransportKind::kLocal,
                           .uid = caller.uid});
  }
  return request.length;
}

absl::StatusOr<uint64_t> TransferEngine::CopyThroughExport(
    const Caller& caller, const LocalCopyRequest& request,
    const Region& local) {
  const TransferTarget& remote = *request.target;
  const bool write = request.op == OpType::kWrite;
  // A descriptor this daemon issued: its export, and the permissions too.
  auto found = regions_->FindExportedById(remote.self_region_id);
  if (!found.ok()) return found.status();
  const std::shared_ptr<Region> target = *std::move(found);  // held
  const std::string label = target->name().empty()
                                ? absl::StrCat("region #", target->id())
                                : absl::StrCat("region '", target->name(), "'");
  if (absl::Status s = CheckLocalAccess(caller, target->acl(),
                                        TargetNeed(request.op), label);
      !s.ok()) {
    return absl::PermissionDeniedError(absl::StrCat(
        s.message(),
        " (a transfer to a region of this same daemon needs the region's "
        "own permissions as well as its export)"));
  }
  Region& region = *target;
  const uint64_t length = request.length;
  RDMAD_RETURN_IF_ERROR(CheckRange("remote", region.name(), region.size(),
                                   request.target_offset, length));
  const RemoteAccess needed =
      write ? RemoteAccess::kWrite : RemoteAccess::kRead;
  // Chunk by chunk, each under a use of the descriptor's export: an
  // unexport, re-export or free waits for the chunk being copied, and the
  // next chunk then fails.
  for (uint64_t done = 0; done < length;) {
    auto use = region.BeginExportUse(remote.self_key, needed);
    if (!use.ok()) return use.status();
    const uint64_t n = std::min(kCopyChunk, length - done);
    RDMAD_RETURN_IF_ERROR(MoveBytes(request, local, region, done, n));
    done += n;
  }
  return NotifyCopied(caller, request, region);
}

void TransferEngine::Report(OpType op, const std::string& peer,
                            const absl::StatusOr<TransferResult>& result) {
  // Outside mu_: the observer takes locks of its own.
  if (TransferObserver* observer = observer_.load(std::memory_order_acquire)) {
    TransferRecord record;
    record.op = op;
    record.peer = &peer;
    record.code = result.status().code();
    if (result.ok()) {
      record.transport = result->transport;
      record.bytes = result->bytes;
      record.latency = result->latency;
    }
    observer->OnTransferDone(record);
  }
  if (!result.ok()) {
    ops_failed_.fetch_add(1, std::memory_order_relaxed);
  } else {
    ops_ok_.fetch_add(1, std::memory_order_relaxed);
    (op == OpType::kWrite ? bytes_written_ : bytes_read_)
        .fetch_add(result->bytes, std::memory_order_relaxed);
  }
}

void TransferEngine::Finish(OpType op, const std::string& peer, uint32_t uid,
                            bool charged,
                            absl::StatusOr<TransferResult> result,
                            TransferDone& done) {
  if (charged) Release(uid);
  Report(op, peer, result);
  // Moved out first: what `done` holds goes with it once it ran, even if
  // the caller keeps the object it was in.
  TransferDone run = std::move(done);
  run(std::move(result));
}

TransferCounters TransferEngine::counters() const {
  TransferCounters c;
  c.ops_ok = ops_ok_.load(std::memory_order_relaxed);
  c.ops_failed = ops_failed_.load(std::memory_order_relaxed);
  c.bytes_written = bytes_written_.load(std::memory_order_relaxed);
  c.bytes_read = bytes_read_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace rdmad::core
