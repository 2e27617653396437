// Which cap applies to the bytes regions hold (daemon/core/pinned_cap.h):
// the locked-memory limit only where memory is pinned, half of the node's
// memory where nothing else caps regions; and how much of it one uid may
// hold.
#include "daemon/core/pinned_cap.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::core {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kGiB = 1 << 30;

TEST(PinnedCapTest, VerbsIsCappedByTheLockedMemoryLimit) {
  const PinnedCap cap = ChoosePinnedCap(true, 0, 8 * kMiB, 64 * kGiB);
  EXPECT_EQ(cap.bytes, 8 * kMiB);
  EXPECT_THAT(cap.source, HasSubstr("locked-memory limit"));
}

TEST(PinnedCapTest, TcpOnlyIsCappedByHalfTheNodesMemory) {
  // Nothing is pinned, so the locked-memory limit does not apply; but the
  // regions are memory all the same.
  const PinnedCap cap = ChoosePinnedCap(false, 0, 8 * kMiB, 64 * kGiB);
  EXPECT_EQ(cap.bytes, 32 * kGiB);
  EXPECT_THAT(cap.source, HasSubstr("half of this node's 64 GiB"));
  EXPECT_THAT(cap.source, HasSubstr("no RDMA device"));
  EXPECT_THAT(cap.source, HasSubstr("max_pinned_bytes"));
}

TEST(PinnedCapTest, AnUnlimitedLockedMemoryLimitIsNoCapEither) {
  const PinnedCap cap = ChoosePinnedCap(true, 0, 0, 64 * kGiB);
  EXPECT_EQ(cap.bytes, 32 * kGiB);
  EXPECT_THAT(cap.source, HasSubstr("unlimited"));
}

TEST(PinnedCapTest, ConfiguredCapWinsEverywhere) {
  for (bool pins : {true, false}) {
    const PinnedCap cap = ChoosePinnedCap(pins, 16 * kMiB, 8 * kMiB, kGiB);
    EXPECT_EQ(cap.bytes, 16 * kMiB);
    EXPECT_EQ(cap.source, "config max_pinned_bytes");
  }
}

TEST(PinnedCapTest, OneUidMayHoldHalfTheCapUnlessConfigured) {
  const PinnedCap cap{64 * kMiB, "config max_pinned_bytes"};
  EXPECT_EQ(ChooseUidBytesQuota(std::nullopt, cap), 32 * kMiB);
  EXPECT_EQ(ChooseUidBytesQuota(8 * kMiB, cap), 8 * kMiB);
  EXPECT_EQ(ChooseUidBytesQuota(0, cap), 0u) << "0 configured: no quota";
  EXPECT_EQ(ChooseUidBytesQuota(std::nullopt, PinnedCap{}), 0u)
      << "no cap, nothing to take half of";
}

}  // namespace
}  // namespace rdmad::core
