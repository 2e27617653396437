// CopyRegionBytes: the same bytes as memmove whatever the overlap, and for
// state-directory memory that a client truncated, DATA_LOSS instead of a
// SIGBUS that would kill the daemon.
#include "daemon/core/region_copy.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/state_test_util.h"

namespace rdmad::core {
namespace {

using ::rdmad::testing::ScratchDir;
using ::testing::HasSubstr;

class RegionCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    dir_fd_.reset(::open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY));
    ASSERT_TRUE(dir_fd_.valid());
  }

  std::shared_ptr<Region> FileRegion(const std::string& name, uint64_t size) {
    auto segment = ShmSegment::CreateFile(dir_fd_.get(), name, size);
    EXPECT_TRUE(segment.ok()) << segment.status();
    if (!segment.ok()) return nullptr;
    return std::make_shared<Region>(++id_, name, RegionOwnerKind::kDaemon,
                                    Caller{}, *std::move(segment), nullptr);
  }
  std::shared_ptr<Region> MemfdRegion(const std::string& name, uint64_t size) {
    auto segment = ShmSegment::Create(name, size);
    EXPECT_TRUE(segment.ok()) << segment.status();
    if (!segment.ok()) return nullptr;
    return std::make_shared<Region>(++id_, name, RegionOwnerKind::kDaemon,
                                    Caller{}, *std::move(segment), nullptr);
  }
  static void Fill(const Region& region) {
    for (uint64_t i = 0; i < region.size(); ++i) {
      region.data()[i] = static_cast<char>(i * 7 + i / 251);
    }
  }

  ScratchDir dir_;
  UniqueFd dir_fd_;
  uint64_t id_ = 0;
};

TEST_F(RegionCopyTest, MatchesMemmoveForEveryOverlap) {
  constexpr uint64_t kSize = 3 << 20;  // spans several bounce chunks
  auto file = FileRegion("f.mem", kSize);
  ASSERT_NE(file, nullptr);
  ASSERT_TRUE(file->can_shrink());
  std::vector<char> expected(kSize);
  const struct {
    uint64_t to, from, length;
  } cases[] = {{0, 1, kSize - 1},           {1, 0, kSize - 1},
               {100, 4096, 2 << 20},        {4096, 100, 2 << 20},
               {0, (1 << 20) + 3, 1 << 20}, {5, 5, 1000},
               {(2 << 20), 0, 1 << 20}};
  for (const auto& c : cases) {
    Fill(*file);
    std::memcpy(expected.data(), file->data(), kSize);
    std::memmove(expected.data() + c.to, expected.data() + c.from, c.length);
    ASSERT_TRUE(CopyRegionBytes(*file, c.to, *file, c.from, c.length).ok());
    EXPECT_EQ(std::memcmp(expected.data(), file->data(), kSize), 0)
        << c.to << " <- " << c.from << " x " << c.length;
  }
}

TEST_F(RegionCopyTest, BetweenMemfdAndStateFileBothWays) {
  auto file = FileRegion("g.mem", 1 << 20);
  auto memfd = MemfdRegion("m", 1 << 20);
  ASSERT_NE(file, nullptr);
  ASSERT_NE(memfd, nullptr);
  std::memcpy(memfd->data() + 10, "to the file", 11);
  ASSERT_TRUE(CopyRegionBytes(*file, 500, *memfd, 10, 11).ok());
  EXPECT_EQ(std::string(file->data() + 500, 11), "to the file");
  std::memcpy(file->data() + 7, "to the memfd", 12);
  ASSERT_TRUE(CopyRegionBytes(*memfd, 0, *file, 7, 12).ok());
  EXPECT_EQ(std::string(memfd->data(), 12), "to the memfd");
  // Memfds alone: the plain memmove path.
  auto other = MemfdRegion("n", 4096);
  ASSERT_TRUE(CopyRegionBytes(*other, 1, *memfd, 0, 12).ok());
  EXPECT_EQ(std::string(other->data() + 1, 12), "to the memfd");
}

TEST_F(RegionCopyTest, TruncatedStateFileIsDataLossNotACrash) {
  auto file = FileRegion("h.mem", 1 << 20);
  auto memfd = MemfdRegion("m", 1 << 20);
  ASSERT_NE(file, nullptr);
  ASSERT_NE(memfd, nullptr);
  // What a client holding the region's descriptor could do.
  ASSERT_EQ(::ftruncate(file->fd(), 4096), 0);
  auto into = CopyRegionBytes(*file, 8192, *memfd, 0, 4096);
  EXPECT_EQ(into.code(), absl::StatusCode::kDataLoss) << into;
  EXPECT_THAT(into.message(), HasSubstr("truncated"));
  auto from = CopyRegionBytes(*memfd, 0, *file, 1000, 100000);
  EXPECT_EQ(from.code(), absl::StatusCode::kDataLoss) << from;
  auto within = CopyRegionBytes(*file, 0, *file, 4000, 8000);
  EXPECT_EQ(within.code(), absl::StatusCode::kDataLoss) << within;
  // What is still there still copies.
  std::memcpy(file->data(), "still here", 10);
  ASSERT_TRUE(CopyRegionBytes(*memfd, 0, *file, 0, 10).ok());
  EXPECT_EQ(std::string(memfd->data(), 10), "still here");
}

}  // namespace
}  // namespace rdmad::core
