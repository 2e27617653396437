// BenchWindow: which operations one thread of `rdmactl bench --window K`
// has in flight, and which batch a completion belongs to.
//
// Slot s holds one batch of at most `batch` operations, tagged s * batch + i
// (Tag). Start puts `count` operations of a slot in flight; Complete takes
// each completion by its tag and says whether it was its batch's last.
//
// A completion whose tag names no operation in flight (a slot out of
// range, an index past its batch's count, or an operation already
// completed) is the daemon's or the queue's error, never the benchmark's:
// Complete returns INTERNAL and changes nothing, so that the run stops
// instead of counting an operation twice or ending a batch early.
//
// Example:
//   BenchWindow window(/*slots=*/8, /*batch=*/64);
//   window.Start(0, 64);       // ops tagged 0..63 submitted
//   auto done = window.Complete(completion.tag);
//   if (!done.ok()) return done.status();
//   if (done->batch_done) ... // slot done->slot is free again
//
// Thread-compatible: one per worker thread.
#ifndef RDMAD_CLIENT_RDMACTL_BENCH_WINDOW_H_
#define RDMAD_CLIENT_RDMACTL_BENCH_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace rdmad::rdmactl {

class BenchWindow {
 public:
  // `slots` batches of at most `batch` operations each (both at least 1).
  BenchWindow(size_t slots, uint64_t batch);

  size_t slots() const { return left_.size(); }
  uint64_t batch() const { return batch_; }
  // The tag of operation `i` (< batch) of `slot`.
  uint64_t Tag(size_t slot, uint64_t i) const { return slot * batch_ + i; }
  // Operations of `slot` in flight.
  uint64_t left(size_t slot) const { return left_[slot]; }

  // Puts operations 0..count-1 of `slot` in flight. The slot has none in
  // flight, and 1 <= count <= batch.
  void Start(size_t slot, uint64_t count);

  struct Completed {
    size_t slot = 0;
    bool batch_done = false;  // the last of its batch in flight
  };
  // Takes the completion of the operation tagged `tag`; INTERNAL, with
  // nothing changed, when no operation with that tag is in flight.
  absl::StatusOr<Completed> Complete(uint64_t tag);

 private:
  const uint64_t batch_;
  std::vector<uint64_t> left_;   // per slot
  std::vector<bool> in_flight_;  // per tag
};

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_BENCH_WINDOW_H_
