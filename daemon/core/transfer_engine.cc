#include "daemon/core/transfer_engine.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/size.h"
#include "daemon/core/access_control.h"
#include "daemon/core/directory_route.h"
#include "daemon/core/region_copy.h"

namespace rdmad::core {
namespace {

// A copy to a descriptor-routed region moves this much per ExportUse, so
// that a revocation of its export waits for at most one chunk, not for a
// whole large copy.
constexpr uint64_t kCopyChunk = 1ull << 20;

absl::Status CheckRange(const char* what, const std::string& region_name,
                        uint64_t size, uint64_t offset, uint64_t length) {
  if (RangeInside(size, offset, length)) return absl::OkStatus();
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

}  // namespace

std::string RemoteRegionLabel(const RemoteRegionInfo& region) {
  return region.name.empty() ? absl::StrCat("region #", region.region_id)
                             : absl::StrCat("region '", region.name, "'");
}

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

void TransferEngine::Submit(const Caller& caller, TransferSpec spec,
                            TransferDone done) {
  TransferRequest request{std::move(spec), std::move(done)};
  SubmitBatch(caller, absl::MakeSpan(&request, 1));
}

void TransferEngine::SubmitBatch(const Caller& caller,
                                 absl::Span<TransferRequest> requests) {
  std::vector<Transfer> remote;
  RegionResolver* directory = directory_.load(std::memory_order_acquire);
  for (TransferRequest& request : requests) {
    std::optional<Transfer> transfer = Check(caller, request);
    if (!transfer.has_value()) continue;
    // A name with no region here is looked for in the cluster.
    const bool by_directory =
        transfer->remote.is_local() && directory != nullptr &&
        transfer->remote.self_region_id == 0 &&
        !transfer->remote.name.empty() &&
        absl::IsNotFound(
            regions_->FindForUse(caller, RegionKey{0, transfer->remote.name})
                .status());
    if (transfer->remote.is_local() && !by_directory) {
      Finish(transfer->op, transfer->remote.peer, caller.uid, true,
             CopyLocal(caller, *transfer), transfer->done);
      continue;
    }
    // Accounting happens when the peer layer finishes it.
    transfer->done = [this, op = transfer->op, peer = transfer->remote.peer,
                      uid = caller.uid, done = std::move(transfer->done)](
                         absl::StatusOr<TransferResult> result) mutable {
      Finish(op, peer, uid, true, std::move(result), done);
    };
    if (by_directory) {
      RouteThroughDirectory(directory, remote_, *std::move(transfer));
      continue;
    }
    remote.push_back(*std::move(transfer));
  }
  if (!remote.empty()) remote_->SubmitBatch(absl::MakeSpan(remote));
}

std::optional<Transfer> TransferEngine::Check(const Caller& caller,
                                              TransferRequest& request) {
  const TransferSpec& spec = request.spec;
  if (absl::Status s = Acquire(caller.uid); !s.ok()) {
    Finish(spec.op, spec.remote.peer, caller.uid, false, s, request.done);
    return std::nullopt;
  }
  auto fail = [&](absl::Status status) {
    Finish(spec.op, spec.remote.peer, caller.uid, true, std::move(status),
           request.done);
    return std::nullopt;
  };
  if (!spec.remote.is_local() && remote_ == nullptr) {
    return fail(absl::FailedPreconditionError(
        "this daemon has no data transport to other daemons"));
  }
  // WRITE sends the local bytes (reads them); READ lands bytes in them.
  const uint32_t need = spec.op == OpType::kWrite ? kLocalRead : kLocalWrite;
  auto local = regions_->FindForUse(caller, spec.local, need);
  if (!local.ok()) return fail(local.status());
  if (absl::Status s = CheckRange("local", (*local)->name(), (*local)->size(),
                                  spec.local_offset, spec.length);
      !s.ok()) {
    return fail(std::move(s));
  }
  Transfer t;
  t.op = spec.op;
  t.local = *std::move(local);
  t.local_offset = spec.local_offset;
  t.length = spec.length;
  t.remote = std::move(request.spec.remote);
  t.deadline = spec.deadline;
  t.immediate = spec.immediate;
  t.uid = caller.uid;
  t.start = absl::Now();
  t.done = std::move(request.done);
  return t;
}

absl::StatusOr<TransferResult> TransferEngine::CopyLocal(
    const Caller& caller, const Transfer& transfer) {
  const TransferTarget& remote = transfer.remote;
  const bool write = transfer.op == OpType::kWrite;
  // The target is read by a READ and written by a WRITE.
  const uint32_t need = write ? kLocalWrite : kLocalRead;
  std::shared_ptr<Region> target;
  std::optional<uint64_t> export_key;  // the self route copies under it
  if (remote.self_region_id == 0) {
    if (remote.name.empty()) {
      return absl::InvalidArgumentError("no target region named");
    }
    auto found = regions_->FindForUse(caller, RegionKey{0, remote.name}, need);
    if (!found.ok()) return found.status();
    target = *std::move(found);
  } else {
    // A descriptor this daemon issued: its export, and the permissions too.
    auto found = regions_->FindExportedById(remote.self_region_id);
    if (!found.ok()) return found.status();
    target = *std::move(found);
    const std::string label =
        target->name().empty()
            ? absl::StrCat("region #", target->id())
            : absl::StrCat("region '", target->name(), "'");
    if (absl::Status s = CheckLocalAccess(caller, target->acl(), need, label);
        !s.ok()) {
      return absl::PermissionDeniedError(absl::StrCat(
          s.message(),
          " (a transfer to a region of this same daemon needs the region's "
          "own permissions as well as its export)"));
    }
    export_key = remote.self_key;
  }
  Region& region = *target;
  if (absl::Status s = CheckRange("remote", region.name(), region.size(),
                                  remote.offset, transfer.length);
      !s.ok()) {
    return s;
  }
  const RemoteAccess needed = write ? RemoteAccess::kWrite : RemoteAccess::kRead;
  // By name, one copy; through a descriptor, chunk by chunk, each under a
  // use of the descriptor's export: an unexport, re-export or free waits
  // for the chunk being copied, and the next chunk then fails. The two
  // ranges may be the same region; memory a client could truncate is
  // copied without risking SIGBUS (region_copy.h).
  const uint64_t chunk = export_key.has_value() ? kCopyChunk : transfer.length;
  for (uint64_t done = 0; done < transfer.length;) {
    std::optional<ExportUse> use;
    if (export_key.has_value()) {
      auto begun = region.BeginExportUse(*export_key, needed);
      if (!begun.ok()) return begun.status();
      use.emplace(*std::move(begun));
    }
    const uint64_t n = std::min(chunk, transfer.length - done);
    const absl::Status copied =
        write ? CopyRegionBytes(region, remote.offset + done, *transfer.local,
                                transfer.local_offset + done, n)
              : CopyRegionBytes(*transfer.local, transfer.local_offset + done,
                                region, remote.offset + done, n);
    if (!copied.ok()) return copied;
    done += n;
  }
  if (write && transfer.immediate.has_value() && notifications_ != nullptr) {
    notifications_->Notify(region, remote.offset, transfer.length,
                           *transfer.immediate);
  }
  return TransferResult{transfer.length, TransportKind::kLocal,
                        absl::Now() - transfer.start};
}

void TransferEngine::Finish(OpType op, const std::string& peer, uint32_t uid,
                            bool charged,
                            absl::StatusOr<TransferResult> result,
                            TransferDone& done) {
  if (charged) Release(uid);
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
  {
    absl::MutexLock lock(&mu_);
    if (!result.ok()) {
      ++counters_.ops_failed;
    } else {
      ++counters_.ops_ok;
      if (op == OpType::kWrite) {
        counters_.bytes_written += result->bytes;
      } else {
        counters_.bytes_read += result->bytes;
      }
    }
  }
  TransferDone run = std::move(done);
  run(std::move(result));
}

TransferCounters TransferEngine::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

}  // namespace rdmad::core
