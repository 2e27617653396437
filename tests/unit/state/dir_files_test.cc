// Small-file chores in a directory held by descriptor (daemon/state/
// dir_files.h): listings are sorted and keep the caller's descriptor usable,
// reads stop one byte past the bound, and nothing but a regular file is
// read.
#include "daemon/state/dir_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/unique_fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/state_test_util.h"

namespace rdmad::state {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class DirFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    fd_ = UniqueFd(::open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY |
                                                   O_CLOEXEC));
    ASSERT_TRUE(fd_);
  }

  testing::ScratchDir dir_;
  UniqueFd fd_;
};

TEST_F(DirFilesTest, ListsNamesSortedTwice) {
  testing::WriteFile(dir_ / "b.rec", "b");
  testing::WriteFile(dir_ / "a.mem", "");
  ASSERT_EQ(::mkdir((dir_ / "damaged").c_str(), 0700), 0);
  for (int round = 0; round < 2; ++round) {
    absl::StatusOr<std::vector<std::string>> names = ListDir(fd_.get());
    ASSERT_TRUE(names.ok()) << names.status();
    EXPECT_THAT(*names, ElementsAre("a.mem", "b.rec", "damaged"))
        << "round " << round;
  }
}

TEST_F(DirFilesTest, WritesAndReadsBackUpToTheBound) {
  {
    UniqueFd out(::openat(fd_.get(), "r", O_WRONLY | O_CREAT | O_CLOEXEC,
                          0600));
    ASSERT_TRUE(out);
    ASSERT_TRUE(WriteAll(out.get(), "0123456789").ok());
  }
  absl::StatusOr<std::string> whole = ReadSmallFile(fd_.get(), "r", 64);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(*whole, "0123456789");
  absl::StatusOr<std::string> cut = ReadSmallFile(fd_.get(), "r", 4);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(*cut, "01234") << "one byte past the bound shows it is too long";
}

TEST_F(DirFilesTest, ReadsOnlyRegularFiles) {
  testing::WriteFile(dir_ / "target", "secret");
  ASSERT_EQ(::symlink((dir_ / "target").c_str(), (dir_ / "link").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  ASSERT_EQ(::mkdir((dir_ / "sub").c_str(), 0700), 0);

  EXPECT_FALSE(ReadSmallFile(fd_.get(), "link", 64).ok()) << "not followed";
  absl::StatusOr<std::string> fifo = ReadSmallFile(fd_.get(), "fifo", 64);
  EXPECT_EQ(fifo.status().code(), absl::StatusCode::kDataLoss)
      << "not waited on";
  EXPECT_EQ(ReadSmallFile(fd_.get(), "sub", 64).status().code(),
            absl::StatusCode::kDataLoss);
  absl::StatusOr<std::string> missing = ReadSmallFile(fd_.get(), "gone", 64);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("gone"));
}

TEST(DirFilesWriteTest, ABadDescriptorIsAnError) {
  EXPECT_FALSE(WriteAll(-1, "x").ok());
  EXPECT_FALSE(ListDir(-1).ok());
}

}  // namespace
}  // namespace rdmad::state
