// TransferEngine: turns a client's transfer request into a checked move of
// bytes between a local region and a (local or remote) target region.
//
// The engine validates everything it can see locally — the caller may use
// the local region, both ranges lie inside their regions — and hands remote
// work to the transport of the peer. A target on this same daemon (empty
// peer) is copied in memory: the caller needs the local access the
// operation needs on it (write to WRITE into it, read to READ from it), or
// it must be exported for the operation, as a peer would need.
#ifndef RDMAD_DAEMON_CORE_TRANSFER_ENGINE_H_
#define RDMAD_DAEMON_CORE_TRANSFER_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/region_table.h"
#include "daemon/core/transfer_observer.h"

namespace rdmad::core {

enum class OpType { kWrite, kRead };

struct TransferRequest {
  OpType op = OpType::kWrite;
  RegionKey local;
  uint64_t local_offset = 0;
  std::string peer;               // HOST:PORT; empty = this daemon
  std::string remote_name;        // exported region name, or
  std::string remote_descriptor;  // an encoded descriptor
  uint64_t remote_offset = 0;
  uint64_t length = 0;
  absl::Time deadline = absl::InfiniteFuture();
};

struct TransferResult {
  uint64_t bytes = 0;
  std::string transport;  // "local", "tcp", "verbs"
  absl::Duration latency;
};

using TransferDone = std::function<void(absl::StatusOr<TransferResult>)>;

// Moves data to and from other daemons. Implemented by the peer layer; the
// engine calls it after the local side of a request has been validated.
class RemoteTransfers {
 public:
  virtual ~RemoteTransfers() = default;
  // `local` stays alive until `done` runs. Calls `done` exactly once, from
  // any thread, no later than shortly after request.deadline.
  virtual void Submit(const TransferRequest& request,
                      std::shared_ptr<Region> local, TransferDone done) = 0;
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

// Thread-safe.
class TransferEngine {
 public:
  // Not owned; `remote` may be null until a transport is wired in.
  TransferEngine(RegionTable* regions, RemoteTransfers* remote,
                 TransferLimits limits = {});

  // Validates and starts a transfer for `caller`; `done` runs exactly once,
  // possibly before Submit returns.
  void Submit(const Caller& caller, const TransferRequest& request,
              TransferDone done);

  TransferCounters counters() const;

  // Reports every finished transfer to `observer` (not owned; null to stop).
  // Set it before the first Submit; it must outlive the engine's last
  // transfer.
  void SetObserver(TransferObserver* observer) {
    observer_.store(observer, std::memory_order_release);
  }
  // Transfers of `uid` in flight now.
  uint64_t InFlight(uint32_t uid) const;

 private:
  absl::StatusOr<TransferResult> CopyLocal(const Caller& caller,
                                           const TransferRequest& request,
                                           Region& local);
  void Count(const TransferRequest& request,
             const absl::StatusOr<TransferResult>& result);
  // Takes one in-flight slot of `uid`'s quota (RESOURCE_EXHAUSTED if none
  // is left); Release gives it back.
  absl::Status Acquire(uint32_t uid);
  void Release(uint32_t uid);

  RegionTable* const regions_;       // Not owned.
  RemoteTransfers* const remote_;    // Not owned; may be null.
  const TransferLimits limits_;
  std::atomic<TransferObserver*> observer_{nullptr};  // Not owned.

  mutable absl::Mutex mu_;
  TransferCounters counters_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, uint64_t> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_TRANSFER_ENGINE_H_
