#include "daemon/core/transfer_engine.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/size.h"
#include "daemon/core/access_control.h"

namespace rdmad::core {
namespace {

// A local copy moves this much per ExportUse, so that a revocation of the
// target's export waits for at most one chunk, not for a whole large copy.
constexpr uint64_t kCopyChunk = 1ull << 20;

absl::Status CheckRange(const char* what, const std::string& region_name,
                        uint64_t size, uint64_t offset, uint64_t length) {
  if (RangeInside(size, offset, length)) return absl::OkStatus();
  if (length == 0) {
    return absl::InvalidArgumentError("transfer length is 0: move at least one byte");
  }
  return absl::OutOfRangeError(absl::StrCat(
      what, " range [", offset, ", ", offset, "+", length, ") does not fit in ",
      region_name.empty() ? "the region" : absl::StrCat("region '", region_name, "'"),
      " of ", size, " bytes"));
}

}  // namespace

TransferEngine::TransferEngine(RegionTable* regions, RemoteTransfers* remote,
                               TransferLimits limits)
    : regions_(regions), remote_(remote), limits_(limits) {}

absl::Status TransferEngine::Acquire(uint32_t uid) {
  absl::MutexLock lock(&mu_);
  uint64_t& n = in_flight_[uid];
  if (limits_.max_in_flight_per_uid != 0 &&
      n >= limits_.max_in_flight_per_uid) {
    if (n == 0) in_flight_.erase(uid);
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", uid, " already has ", n, " transfers in flight, its quota "
        "(quota_transfers_per_uid) is ", limits_.max_in_flight_per_uid,
        ": wait for some to complete, or raise quota_transfers_per_uid in "
        "the rdmad config and restart rdmad"));
  }
  ++n;
  return absl::OkStatus();
}

void TransferEngine::Release(uint32_t uid) {
  absl::MutexLock lock(&mu_);
  auto it = in_flight_.find(uid);
  if (it == in_flight_.end()) return;
  if (--it->second == 0) in_flight_.erase(it);
}

uint64_t TransferEngine::InFlight(uint32_t uid) const {
  absl::MutexLock lock(&mu_);
  auto it = in_flight_.find(uid);
  return it == in_flight_.end() ? 0 : it->second;
}

void TransferEngine::Submit(const Caller& caller,
                            const TransferRequest& request, TransferDone done) {
  if (absl::Status s = Acquire(caller.uid); !s.ok()) {
    Count(request, s);
    return done(s);
  }
  const uint32_t uid = caller.uid;
  auto finish = [this, &request, &done, uid](absl::StatusOr<TransferResult> result) {
    Release(uid);
    Count(request, result);
    done(std::move(result));
  };
  // WRITE sends the local bytes (reads them); READ lands bytes in them.
  const uint32_t need =
      request.op == OpType::kWrite ? kLocalRead : kLocalWrite;
  auto local = regions_->FindForUse(caller, request.local, need);
  if (!local.ok()) return finish(local.status());
  if (absl::Status s = CheckRange("local", (*local)->name(), (*local)->size(),
                                  request.local_offset, request.length);
      !s.ok()) {
    return finish(s);
  }
  if (request.peer.empty() && request.remote_descriptor.empty()) {
    return finish(CopyLocal(caller, request, **local));
  }
  if (remote_ == nullptr) {
    return finish(absl::UnimplementedError(
        "this daemon has no data transport to other daemons yet"));
  }
  TransferRequest routed = request;
  routed.caller_uid = caller.uid;
  remote_->Submit(routed, *std::move(local),
                  [this, request, uid, done = std::move(done)](
                      absl::StatusOr<TransferResult> result) {
                    Release(uid);
                    Count(request, result);
                    done(std::move(result));
                  });
}

absl::StatusOr<TransferResult> TransferEngine::CopyLocal(
    const Caller& caller, const TransferRequest& request, Region& local) {
  const absl::Time start = absl::Now();
  if (request.remote_name.empty() && request.remote_id == 0) {
    return absl::InvalidArgumentError("no target region named");
  }
  auto target = request.remote_id != 0
                    ? regions_->FindExportedById(request.remote_id)
                    : regions_->FindExported(request.remote_name);
  if (!target.ok()) return target.status();
  Region& region = **target;
  const std::string label = region.name().empty()
                                ? absl::StrCat("region #", region.id())
                                : absl::StrCat("region '", region.name(), "'");
  const bool write = request.op == OpType::kWrite;
  const RemoteAccess needed =
      write ? RemoteAccess::kWrite : RemoteAccess::kRead;
  // The caller is a local user: the target's own permissions apply on top
  // of its export, whatever route led here.
  if (absl::Status s = CheckLocalAccess(
          caller, region.acl(), write ? kLocalWrite : kLocalRead, label);
      !s.ok()) {
    return absl::PermissionDeniedError(
        absl::StrCat(s.message(),
                     " (a transfer to a region of this same daemon needs the "
                     "region's own permissions as well as its export)"));
  }
  if (request.remote_id == 0 && !Allows(region.exported().access, needed)) {
    return absl::PermissionDeniedError(
        absl::StrCat(label, " is not exported for ", write ? "write" : "read",
                     ": export it with ", write ? "w or rw" : "r or rw"));
  }
  if (absl::Status s = CheckRange("remote", region.name(), region.size(),
                                  request.remote_offset, request.length);
      !s.ok()) {
    return s;
  }
  // Chunk by chunk, each under an ExportUse of the export the first chunk
  // found (or the descriptor's): an unexport, re-export or free waits for
  // the chunk being copied, and the next chunk then fails.
  std::optional<uint64_t> key;
  if (request.remote_id != 0) key = request.remote_key;
  for (uint64_t done = 0; done < request.length;) {
    auto use = region.BeginExportUse(key, needed);
    if (!use.ok()) return use.status();
    key = use->key();
    const uint64_t n = std::min(kCopyChunk, request.length - done);
    char* local_bytes = local.data() + request.local_offset + done;
    char* remote_bytes = region.data() + request.remote_offset + done;
    // memmove: the two ranges may be the same region.
    if (write) {
      std::memmove(remote_bytes, local_bytes, n);
    } else {
      std::memmove(local_bytes, remote_bytes, n);
    }
    done += n;
  }
  return TransferResult{request.length, "local", absl::Now() - start};
}

void TransferEngine::Count(const TransferRequest& request,
                           const absl::StatusOr<TransferResult>& result) {
  // Outside mu_: the observer takes locks of its own.
  if (TransferObserver* observer = observer_.load(std::memory_order_acquire)) {
    observer->OnTransferDone(request, result);
  }
  absl::MutexLock lock(&mu_);
  if (!result.ok()) {
    ++counters_.ops_failed;
    return;
  }
  ++counters_.ops_ok;
  if (request.op == OpType::kWrite) counters_.bytes_written += result->bytes;
  else counters_.bytes_read += result->bytes;
}

TransferCounters TransferEngine::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

}  // namespace rdmad::core
