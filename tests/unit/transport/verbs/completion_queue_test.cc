// What CompletionQueue::Grow decides before it touches the CQ
// (CqNeedsResize): no RDMA device needed.
#include "daemon/transport/verbs/completion_queue.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::verbs {
namespace {

using ::testing::HasSubstr;

constexpr int kRxeMaxCqe = 32767;  // soft-RoCE's limit (Debian 12)

TEST(CqNeedsResizeTest, PastTheDevicesMaxCqeIsResourceExhausted) {
  const absl::StatusOr<bool> resize =
      CqNeedsResize(/*capacity=*/4096, kRxeMaxCqe + 1, kRxeMaxCqe, "rxe0");
  ASSERT_FALSE(resize.ok());
  EXPECT_EQ(resize.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(resize.status().message(),
              HasSubstr("a CQ of 32768 entries is not possible on rxe0 "
                        "(max_cqe 32767)"));
}

TEST(CqNeedsResizeTest, UpToTheDevicesMaxCqeResizes) {
  const absl::StatusOr<bool> resize =
      CqNeedsResize(/*capacity=*/4096, kRxeMaxCqe, kRxeMaxCqe, "rxe0");
  ASSERT_TRUE(resize.ok()) << resize.status();
  EXPECT_TRUE(*resize);
}

TEST(CqNeedsResizeTest, ACqThatHoldsEnoughIsLeftAlone) {
  for (const int wanted : {1, 4095, 4096}) {
    const absl::StatusOr<bool> resize =
        CqNeedsResize(/*capacity=*/4096, wanted, kRxeMaxCqe, "rxe0");
    ASSERT_TRUE(resize.ok()) << wanted << ": " << resize.status();
    EXPECT_FALSE(*resize) << wanted;
  }
  // Even on a device whose limit it already exceeds: nothing to change.
  const absl::StatusOr<bool> resize =
      CqNeedsResize(/*capacity=*/4096, 4096, /*max_cqe=*/1024, "rxe0");
  ASSERT_TRUE(resize.ok()) << resize.status();
  EXPECT_FALSE(*resize);
}

}  // namespace
}  // namespace rdmad::verbs
