#include "daemon/core/transfer_engine.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/size.h"

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
    return finish(CopyLocal(caller, request, **local));
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
    const Caller& caller, const TransferRequest& request, Region& local) {
  const absl::Time start = absl::Now();
  if (request.remote_name.empty()) {
    return absl::InvalidArgumentError("no target region named");
  }
  // The target is a region of this node: what the caller may do with it
  // locally decides (WRITE lands bytes in it, READ takes them out), as it
  // would for a mapping. A region the caller may not use locally is still
  // reachable where it is exported for the operation, as any peer (or this
  // daemon's own peer address) could reach it.
  const uint32_t need = request.op == OpType::kWrite ? kLocalWrite : kLocalRead;
  auto target =
      regions_->FindForUse(caller, RegionKey{0, request.remote_name}, need);
  if (!target.ok() && !absl::IsNotFound(target.status())) {
    auto exported = regions_->FindExported(request.remote_name);
    const RemoteAccess needed = request.op == OpType::kWrite
                                    ? RemoteAccess::kWrite
                                    : RemoteAccess::kRead;
    if (exported.ok() && Allows((*exported)->exported().access, needed)) {
      target = *std::move(exported);
    }
  }
  if (!target.ok()) return target.status();
  if (absl::Status s = CheckRange("target", request.remote_name,
                                  (*target)->size(), request.remote_offset,
                                  request.length);
      !s.ok()) {
    return s;
  }
  char* local_bytes = local.data() + request.local_offset;
  char* remote_bytes = (*target)->data() + request.remote_offset;
  // memmove: the two ranges may be the same region.
  if (request.op == OpType::kWrite) {
    std::memmove(remote_bytes, local_bytes, request.length);
  } else {
    std::memmove(local_bytes, remote_bytes, request.length);
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
