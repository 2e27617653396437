// ShmSegment's memory that outlives the daemon: files in a state directory
// (CreateFile/OpenFile) and memfds back from the fd store (AdoptKept). The
// bytes written by one mapping are there in the next; anything that is not
// what rdmad made (truncated, a symlink, another mode, unsealed) is refused
// with a message; a file that grew past its region is cut back to it
// (CutFileBackTo), its region's bytes untouched.
#include "daemon/core/shm_segment.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/state_test_util.h"

namespace rdmad::core {
namespace {

using ::rdmad::testing::ReadFile;
using ::rdmad::testing::ScratchDir;
using ::rdmad::testing::WriteFile;
using ::testing::HasSubstr;

class StateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    dir_fd_.reset(::open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY));
    ASSERT_TRUE(dir_fd_.valid());
  }
  ScratchDir dir_;
  UniqueFd dir_fd_;
};

TEST_F(StateFileTest, CreateThenOpenKeepsTheBytes) {
  {
    auto segment = ShmSegment::CreateFile(dir_fd_.get(), "a.mem", 10000);
    ASSERT_TRUE(segment.ok()) << segment.status();
    EXPECT_EQ(segment->size(), 10000u);
    EXPECT_GE(segment->mapped_size(), 10000u);
    EXPECT_TRUE(segment->can_shrink());
    EXPECT_THAT(segment->backing(), HasSubstr("state-file"));
    std::memcpy(static_cast<char*>(segment->data()) + 9990, "persisted", 9);
    struct stat st;
    ASSERT_EQ(::stat((dir_ / "a.mem").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    // All pages allocated up front: a full tmpfs fails at creation.
    EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, 10000u);
  }
  auto again = ShmSegment::OpenFile(dir_fd_.get(), "a.mem", 10000);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(
      std::memcmp(static_cast<char*>(again->data()) + 9990, "persisted", 9), 0);
  EXPECT_TRUE(again->can_shrink());
}

TEST_F(StateFileTest, CreateRefusesAnExistingFile) {
  WriteFile(dir_ / "b.mem", "x");
  auto segment = ShmSegment::CreateFile(dir_fd_.get(), "b.mem", 4096);
  EXPECT_FALSE(segment.ok());
  EXPECT_EQ(ReadFile(dir_ / "b.mem"), "x");  // left alone
}

TEST_F(StateFileTest, OpenRefusesATruncatedFile) {
  {
    auto segment = ShmSegment::CreateFile(dir_fd_.get(), "c.mem", 1 << 20);
    ASSERT_TRUE(segment.ok()) << segment.status();
  }
  ASSERT_EQ(::truncate((dir_ / "c.mem").c_str(), 4096), 0);
  auto again = ShmSegment::OpenFile(dir_fd_.get(), "c.mem", 1 << 20);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(again.status().message(), HasSubstr("truncated"));
}

// What a client holding the file's descriptor can do to it: grow it with
// ftruncate, write past the end, allocate past the end without growing it.
void GrowThroughAnotherDescriptor(const std::string& path, uint64_t size) {
  UniqueFd fd(::open(path.c_str(), O_RDWR));
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(::ftruncate(fd.get(), static_cast<off_t>(size)), 0);
  const std::string bytes(64 << 10, 'x');
  ASSERT_EQ(::pwrite(fd.get(), bytes.data(), bytes.size(),
                     static_cast<off_t>(size / 2)),
            static_cast<ssize_t>(bytes.size()));
  ASSERT_EQ(::fallocate(fd.get(), FALLOC_FL_KEEP_SIZE, static_cast<off_t>(size),
                        1 << 20),
            0);
}

std::pair<uint64_t, uint64_t> SizeAndAllocated(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {0, 0};
  return {static_cast<uint64_t>(st.st_size),
          static_cast<uint64_t>(st.st_blocks) * 512};
}

TEST_F(StateFileTest, CutFileBackToLeavesTheRegionAndNothingPastIt) {
  auto segment = ShmSegment::CreateFile(dir_fd_.get(), "g.mem", 1 << 20);
  ASSERT_TRUE(segment.ok()) << segment.status();
  std::memcpy(segment->data(), "region bytes", 12);
  auto none = CutFileBackTo(segment->fd(), segment->mapped_size());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value()) << "nothing to cut";

  GrowThroughAnotherDescriptor(dir_ / "g.mem", 64 << 20);
  auto excess = CutFileBackTo(segment->fd(), segment->mapped_size());
  ASSERT_TRUE(excess.ok()) << excess.status();
  ASSERT_TRUE(excess->has_value());
  EXPECT_EQ((*excess)->size, 64u << 20);
  EXPECT_EQ((*excess)->allocated, (1u << 20) + (64u << 10) + (1u << 20));
  EXPECT_EQ(SizeAndAllocated(dir_ / "g.mem"),
            std::make_pair(uint64_t{1} << 20, uint64_t{1} << 20));
  EXPECT_EQ(std::memcmp(segment->data(), "region bytes", 12), 0);

  // Memory allocated past the end alone (the size unchanged) is freed too.
  {
    UniqueFd fd(::open((dir_ / "g.mem").c_str(), O_RDWR));
    ASSERT_EQ(::fallocate(fd.get(), FALLOC_FL_KEEP_SIZE, 1 << 20, 4 << 20), 0);
  }
  excess = CutFileBackTo(segment->fd(), segment->mapped_size());
  ASSERT_TRUE(excess.ok() && excess->has_value());
  EXPECT_EQ((*excess)->size, 1u << 20);
  EXPECT_EQ((*excess)->allocated, 5u << 20);
  EXPECT_EQ(SizeAndAllocated(dir_ / "g.mem").second, uint64_t{1} << 20);
}

TEST_F(StateFileTest, OpenCutsBackAFileThatGrewAndSaysWhatItHeld) {
  {
    auto segment = ShmSegment::CreateFile(dir_fd_.get(), "h.mem", 1 << 20);
    ASSERT_TRUE(segment.ok()) << segment.status();
    std::memcpy(segment->data(), "kept", 4);
  }
  GrowThroughAnotherDescriptor(dir_ / "h.mem", 1 << 30);
  std::string cut;
  auto again = ShmSegment::OpenFile(dir_fd_.get(), "h.mem", 1 << 20, &cut);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(std::memcmp(again->data(), "kept", 4), 0);
  EXPECT_EQ(cut,
            "h.mem had grown to 1 GiB holding 2.1 MiB of memory; cut back to "
            "the region's 1 MiB");
  EXPECT_EQ(SizeAndAllocated(dir_ / "h.mem"),
            std::make_pair(uint64_t{1} << 20, uint64_t{1} << 20));
  // A file that did not grow says nothing.
  again = absl::InternalError("unmapped");
  cut.clear();
  ASSERT_TRUE(ShmSegment::OpenFile(dir_fd_.get(), "h.mem", 1 << 20, &cut).ok());
  EXPECT_EQ(cut, "");
}

TEST_F(StateFileTest, OpenRefusesWhatRdmadDidNotMake) {
  {
    auto segment = ShmSegment::CreateFile(dir_fd_.get(), "d.mem", 4096);
    ASSERT_TRUE(segment.ok()) << segment.status();
  }
  ASSERT_EQ(::symlink("d.mem", (dir_ / "link.mem").c_str()), 0);
  EXPECT_FALSE(ShmSegment::OpenFile(dir_fd_.get(), "link.mem", 4096).ok());
  ASSERT_EQ(::mkfifo((dir_ / "fifo.mem").c_str(), 0600), 0);
  auto fifo = ShmSegment::OpenFile(dir_fd_.get(), "fifo.mem", 4096);
  EXPECT_THAT(fifo.status().message(), HasSubstr("not a regular file"));
  ASSERT_EQ(::chmod((dir_ / "d.mem").c_str(), 0644), 0);
  auto readable = ShmSegment::OpenFile(dir_fd_.get(), "d.mem", 4096);
  EXPECT_THAT(readable.status().message(), HasSubstr("mode 0644"));
  ASSERT_EQ(::chmod((dir_ / "d.mem").c_str(), 0600), 0);
  ASSERT_EQ(::link((dir_ / "d.mem").c_str(), (dir_ / "e.mem").c_str()), 0);
  auto linked = ShmSegment::OpenFile(dir_fd_.get(), "d.mem", 4096);
  EXPECT_THAT(linked.status().message(), HasSubstr("2 links"));
  EXPECT_FALSE(ShmSegment::OpenFile(dir_fd_.get(), "missing.mem", 4096).ok());
  EXPECT_FALSE(ShmSegment::OpenFile(dir_fd_.get(), "d.mem", 0).ok());
}

TEST(KeptMemfdTest, AdoptKeptMapsTheSameBytes) {
  auto made = ShmSegment::Create("kept", 5000);
  ASSERT_TRUE(made.ok()) << made.status();
  std::memcpy(made->data(), "memfd bytes", 11);
  UniqueFd copy(::fcntl(made->fd(), F_DUPFD_CLOEXEC, 0));
  auto adopted = ShmSegment::AdoptKept(std::move(copy), 5000);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(std::memcmp(adopted->data(), "memfd bytes", 11), 0);
  EXPECT_FALSE(adopted->can_shrink());
  EXPECT_EQ(adopted->size(), 5000u);
}

TEST(KeptMemfdTest, AdoptKeptRefusesUnsealedOrShortMemory) {
  UniqueFd unsealed(::memfd_create("plain", MFD_CLOEXEC));
  ASSERT_EQ(::ftruncate(unsealed.get(), 8192), 0);
  auto refused = ShmSegment::AdoptKept(std::move(unsealed), 4096);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("sealed"));

  auto made = ShmSegment::Create("short", 4096);
  ASSERT_TRUE(made.ok());
  UniqueFd copy(::fcntl(made->fd(), F_DUPFD_CLOEXEC, 0));
  auto too_big = ShmSegment::AdoptKept(std::move(copy), 1 << 20);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace rdmad::core
