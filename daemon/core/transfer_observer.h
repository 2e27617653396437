// TransferObserver: how the TransferEngine reports each finished transfer
// to whoever counts them (the Prometheus metrics), without the core
// depending on any metrics library.
#ifndef RDMAD_DAEMON_CORE_TRANSFER_OBSERVER_H_
#define RDMAD_DAEMON_CORE_TRANSFER_OBSERVER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/core/transfer.h"

namespace rdmad::core {

// One finished transfer, as the observer sees it.
struct TransferRecord {
  OpType op = OpType::kWrite;
  // The remote daemon's HOST:PORT; empty for a transfer within this daemon.
  const std::string* peer = nullptr;  // Not owned; valid during the call.
  TransportKind transport = TransportKind::kNone;  // kNone if it failed early
  uint64_t bytes = 0;                              // 0 unless it succeeded
  absl::StatusCode code = absl::StatusCode::kOk;
  absl::Duration latency;
};

class TransferObserver {
 public:
  virtual ~TransferObserver() = default;
  // Called exactly once per transfer the engine finishes, successful or
  // not, from whichever thread finished it (gRPC or I/O threads), and
  // before the caller's completion runs. Must be thread-safe, cheap, and
  // must not call back into the engine.
  virtual void OnTransferDone(const TransferRecord& record) = 0;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_TRANSFER_OBSERVER_H_
