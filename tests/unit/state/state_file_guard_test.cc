// StateFileGuard keeps the memory files of live kept regions at their
// regions' sizes: a file grown through another descriptor (ftruncate, a
// write past the end, memory allocated past the end) is cut back at once,
// its region's bytes untouched; files it does not watch (not a live
// region's, or no longer) are left alone.
#include "daemon/state/state_file_guard.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "daemon/core/shm_segment.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/state_test_util.h"

namespace rdmad::state {
namespace {

using ::rdmad::testing::ScratchDir;

constexpr uint64_t kMiB = 1 << 20;

class StateFileGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    dir_fd_.reset(::open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY));
    ASSERT_TRUE(dir_fd_.valid());
    auto guard = StateFileGuard::Start(dir_fd_.get(), dir_.path());
    ASSERT_TRUE(guard.ok()) << guard.status();
    guard_ = *std::move(guard);
  }

  absl::StatusOr<core::ShmSegment> Make(const std::string& name) {
    return core::ShmSegment::CreateFile(dir_fd_.get(), name, kMiB);
  }

  // What a client holding the descriptor can do.
  void Grow(const std::string& name) {
    UniqueFd fd(::open((dir_ / name).c_str(), O_RDWR));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(::ftruncate(fd.get(), 256 * kMiB), 0);
    const std::string bytes(kMiB, 'x');
    (void)::pwrite(fd.get(), bytes.data(), bytes.size(), 128 * kMiB);
    (void)::fallocate(fd.get(), FALLOC_FL_KEEP_SIZE, 256 * kMiB, 4 * kMiB);
  }

  std::pair<uint64_t, uint64_t> Held(const std::string& name) {
    struct stat st;
    if (::stat((dir_ / name).c_str(), &st) != 0) return {0, 0};
    return {static_cast<uint64_t>(st.st_size),
            static_cast<uint64_t>(st.st_blocks) * 512};
  }

  // Waits (at most 10 s) until `name` holds its 1 MiB and no more.
  bool CutBack(const std::string& name) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (Held(name) != std::make_pair(kMiB, kMiB)) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  }

  ScratchDir dir_;
  UniqueFd dir_fd_;
  std::unique_ptr<StateFileGuard> guard_;
};

TEST_F(StateFileGuardTest, AGrownFileOfALiveRegionIsCutBackAtOnce) {
  auto watched = Make("a.mem");
  auto other = Make("b.mem");
  ASSERT_TRUE(watched.ok() && other.ok());
  std::memcpy(watched->data(), "region", 6);
  guard_->Watch("a.mem", watched->mapped_size(), "region 'a'");
  Grow("b.mem");  // first: its events come before a's
  Grow("a.mem");
  ASSERT_TRUE(CutBack("a.mem")) << Held("a.mem").first;
  EXPECT_GE(guard_->cuts(), 1u);
  EXPECT_EQ(std::memcmp(watched->data(), "region", 6), 0);
  EXPECT_EQ(Held("b.mem").first, 256 * kMiB) << "not a live region's file";

  // No longer watched (freed): left alone, while a watched one is cut.
  auto third = Make("c.mem");
  ASSERT_TRUE(third.ok());
  guard_->Watch("c.mem", third->mapped_size(), "region 'c'");
  guard_->Unwatch("a.mem");
  Grow("a.mem");
  Grow("c.mem");
  ASSERT_TRUE(CutBack("c.mem"));
  EXPECT_EQ(Held("a.mem").first, 256 * kMiB);
}

TEST_F(StateFileGuardTest, WatchChecksAFileThatGrewBefore) {
  auto segment = Make("d.mem");
  ASSERT_TRUE(segment.ok());
  Grow("d.mem");
  guard_->Watch("d.mem", segment->mapped_size(), "region 'd'");
  EXPECT_EQ(Held("d.mem"), std::make_pair(kMiB, kMiB)) << "cut in Watch";
  EXPECT_GE(guard_->cuts(), 1u);
}

}  // namespace
}  // namespace rdmad::state
