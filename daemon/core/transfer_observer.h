// TransferObserver: how the TransferEngine reports each finished transfer
// to whoever counts them (the Prometheus metrics), without the core
// depending on any metrics library.
#ifndef RDMAD_DAEMON_CORE_TRANSFER_OBSERVER_H_
#define RDMAD_DAEMON_CORE_TRANSFER_OBSERVER_H_

#include "absl/status/statusor.h"

namespace rdmad::core {

struct TransferRequest;
struct TransferResult;

class TransferObserver {
 public:
  virtual ~TransferObserver() = default;
  // Called exactly once per transfer the engine finishes, successful or
  // not, from whichever thread finished it (gRPC or transport threads), and
  // before the caller's completion runs. Must be thread-safe, cheap, and
  // must not call back into the engine.
  virtual void OnTransferDone(const TransferRequest& request,
                              const absl::StatusOr<TransferResult>& result) = 0;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_TRANSFER_OBSERVER_H_
