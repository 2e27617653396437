// Which cap applies to the bytes regions hold (daemon/core/pinned_cap.h):
// the locked-memory limit only where memory is pinned.
#include "daemon/core/pinned_cap.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::core {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;

TEST(PinnedCapTest, VerbsIsCappedByTheLockedMemoryLimit) {
  const PinnedCap cap = ChoosePinnedCap(true, 0, 8 * kMiB);
  EXPECT_EQ(cap.bytes, 8 * kMiB);
  EXPECT_THAT(cap.source, HasSubstr("locked-memory limit"));
  EXPECT_EQ(ChoosePinnedCap(true, 0, 0).bytes, 0u);  // unlimited
}

TEST(PinnedCapTest, TcpOnlyPinsNothingSoTheLimitDoesNotApply) {
  const PinnedCap cap = ChoosePinnedCap(false, 0, 8 * kMiB);
  EXPECT_EQ(cap.bytes, 0u);
  EXPECT_THAT(cap.source, HasSubstr("nothing is pinned"));
}

TEST(PinnedCapTest, ConfiguredCapWinsEverywhere) {
  for (bool pins : {true, false}) {
    const PinnedCap cap = ChoosePinnedCap(pins, 16 * kMiB, 8 * kMiB);
    EXPECT_EQ(cap.bytes, 16 * kMiB);
    EXPECT_EQ(cap.source, "config max_pinned_bytes");
  }
}

}  // namespace
}  // namespace rdmad::core
