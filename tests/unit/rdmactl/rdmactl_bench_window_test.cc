// `rdmactl bench --window`'s bookkeeping without a daemon: which batch a
// completion ends, and that a completion for no operation in flight stops
// the run instead of being counted.
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/rdmactl/bench_window.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::rdmactl {
namespace {

using ::testing::HasSubstr;

// Completes `tag`, which must be in flight; whether it ended its batch.
bool CompleteOk(BenchWindow& window, uint64_t tag) {
  auto done = window.Complete(tag);
  EXPECT_TRUE(done.ok()) << tag << ": " << done.status();
  if (!done.ok()) return false;
  EXPECT_EQ(done->slot, tag / window.batch()) << tag;
  return done->batch_done;
}

TEST(BenchWindowTest, TagsNameTheirSlotAndTheLastCompletionEndsTheBatch) {
  BenchWindow window(/*slots=*/3, /*batch=*/4);
  EXPECT_EQ(window.Tag(2, 3), 11u);
  window.Start(1, 4);  // tags 4..7
  window.Start(2, 2);  // tags 8, 9: a short last batch
  // Two batches' completions, interleaved and out of order.
  EXPECT_FALSE(CompleteOk(window, 7));
  EXPECT_FALSE(CompleteOk(window, 8));
  EXPECT_FALSE(CompleteOk(window, 4));
  EXPECT_FALSE(CompleteOk(window, 5));
  EXPECT_EQ(window.left(1), 1u);
  EXPECT_EQ(window.left(2), 1u);
  EXPECT_TRUE(CompleteOk(window, 9));
  EXPECT_TRUE(CompleteOk(window, 6));
  EXPECT_EQ(window.left(1), 0u);
  EXPECT_EQ(window.left(2), 0u);
  // A slot whose batch ended takes the next one, with the same tags.
  window.Start(2, 1);
  EXPECT_TRUE(CompleteOk(window, 8));
}

TEST(BenchWindowTest, ACompletionForNoOperationInFlightIsInternal) {
  BenchWindow window(/*slots=*/2, /*batch=*/4);
  window.Start(0, 2);  // tags 0, 1
  for (uint64_t stray : {uint64_t{2},    // past its batch's count
                         uint64_t{4},    // a slot with nothing in flight
                         uint64_t{8},    // past the last slot
                         ~uint64_t{0}}) {
    auto done = window.Complete(stray);
    ASSERT_FALSE(done.ok()) << stray;
    EXPECT_EQ(done.status().code(), absl::StatusCode::kInternal);
    EXPECT_THAT(done.status().message(),
                HasSubstr(absl::StrCat("tag ", stray)));
  }
  EXPECT_FALSE(CompleteOk(window, 0));
  // The same operation completed twice.
  auto again = window.Complete(0);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kInternal);
  // None of the strays counted: the batch still waits for its other op.
  EXPECT_EQ(window.left(0), 1u);
  EXPECT_TRUE(CompleteOk(window, 1));
}

}  // namespace
}  // namespace rdmad::rdmactl
