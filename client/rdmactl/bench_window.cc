#include "client/rdmactl/bench_window.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rdmad::rdmactl {

BenchWindow::BenchWindow(size_t slots, uint64_t batch)
    : batch_(std::max<uint64_t>(batch, 1)),
      left_(std::max<size_t>(slots, 1), 0),
      in_flight_(left_.size() * batch_, false) {}

void BenchWindow::Start(size_t slot, uint64_t count) {
  count = std::min(count, batch_);
  left_[slot] = count;
  std::fill_n(in_flight_.begin() + Tag(slot, 0), count, true);
}

absl::StatusOr<BenchWindow::Completed> BenchWindow::Complete(uint64_t tag) {
  if (tag >= in_flight_.size() || !in_flight_[tag]) {
    return absl::InternalError(absl::StrCat(
        "a completion with tag ", tag, " for no operation in flight (",
        slots(), " batches of ", batch_,
        "): the daemon completed an operation twice or one it was never "
        "given"));
  }
  in_flight_[tag] = false;
  const size_t slot = tag / batch_;
  return Completed{slot, --left_[slot] == 0};
}

}  // namespace rdmad::rdmactl
