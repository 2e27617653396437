// HeldRemote: a core::RemoteTransfers for engine tests that keeps every
// transfer it is given, batch by batch, until the test finishes them.
#ifndef RDMAD_TESTS_UNIT_FAKES_HELD_REMOTE_H_
#define RDMAD_TESTS_UNIT_FAKES_HELD_REMOTE_H_

#include <utility>
#include <vector>

#include "daemon/core/transfer_engine.h"

namespace rdmad::core::testing {

class HeldRemote final : public RemoteTransfers {
 public:
  void SubmitBatch(absl::Span<Transfer> transfers) override {
    batch_sizes_.push_back(transfers.size());
    for (Transfer& t : transfers) held_.push_back(std::move(t));
  }

  // Finishes every held transfer with `status` (OK: all its bytes, TCP).
  void FinishAll(absl::Status status = absl::OkStatus()) {
    std::vector<Transfer> held = std::move(held_);
    held_.clear();
    for (Transfer& t : held) {
      if (status.ok()) {
        t.done(TransferResult{t.length, TransportKind::kTcp,
                              absl::ZeroDuration()});
      } else {
        t.done(status);
      }
    }
  }

  const std::vector<Transfer>& held() const { return held_; }
  // Sizes of the batches received, in order.
  const std::vector<size_t>& batch_sizes() const { return batch_sizes_; }

 private:
  std::vector<Transfer> held_;
  std::vector<size_t> batch_sizes_;
};

}  // namespace rdmad::core::testing

#endif  // RDMAD_TESTS_UNIT_FAKES_HELD_REMOTE_H_
