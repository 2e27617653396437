#include "daemon/core/transfer_engine.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/size.h"
#include "daemon/core/region_copy.h"

namespace rdmad::core {
namespace {

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
    return finish(CopyLocal(request, **local));
  }
  if (remote_ == nullptr) {
    return finish(absl::UnimplementedError(
        "this daemon has no data transport to other daemons yet"));
  }
  remote_->Submit(request, *std::move(local),
                  [this, request, uid, done = std::move(done)](
                      absl::StatusOr<TransferResult> result) {
                    Release(uid);
                    Count(request, result);
                    done(std::move(result));
                  });
}

absl::StatusOr<TransferResult> TransferEngine::CopyLocal(
    const TransferRequest& request, Region& local) {
  const absl::Time start = absl::Now();
  if (request.remote_name.empty()) {
    return absl::InvalidArgumentError("no target region named");
  }
  auto target = regions_->FindExported(request.remote_name);
  if (!target.ok()) return target.status();
  const ExportState exported = (*target)->exported();
  const RemoteAccess needed =
      request.op == OpType::kWrite ? RemoteAccess::kWrite : RemoteAccess::kRead;
  if (!Allows(exported.access, needed)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "region '", request.remote_name, "' is not exported for ",
        request.op == OpType::kWrite ? "write" : "read",
        ": export it with ", request.op == OpType::kWrite ? "w or rw" : "r or rw"));
  }
  if (absl::Status s = CheckRange("remote", request.remote_name,
                                  (*target)->size(), request.remote_offset,
                                  request.length);
      !s.ok()) {
    return s;
  }
  // The two ranges may be the same region; memory a client could truncate
  // is copied without risking SIGBUS (region_copy.h).
  const absl::Status copied =
      request.op == OpType::kWrite
          ? CopyRegionBytes(**target, request.remote_offset, local,
                            request.local_offset, request.length)
          : CopyRegionBytes(local, request.local_offset, **target,
                            request.remote_offset, request.length);
  if (!copied.ok()) return copied;
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
