// The log's two formats: journald's stream is recognised by device and
// inode (an inherited JOURNAL_STREAM that names another file is not), and
// each journald line starts with its syslog priority and nothing else.
#include "daemon/startup/log_setup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/details/log_msg.h"

namespace rdmad::startup {
namespace {

std::string Format(spdlog::formatter& formatter,
                   spdlog::level::level_enum level) {
  spdlog::details::log_msg msg("rdmad", level, "hello");
  spdlog::memory_buf_t out;
  formatter.format(msg, out);
  return std::string(out.data(), out.size());
}

TEST(LogSetupTest, JournalStreamIsTheFileDescriptorsDeviceAndInode) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  struct stat st;
  ASSERT_EQ(::fstat(fds[1], &st), 0);
  const std::string mine = absl::StrCat(st.st_dev, ":", st.st_ino);
  EXPECT_TRUE(IsJournalStream(mine.c_str(), fds[1]));
  // Another file: a variable inherited by a process whose stderr went
  // elsewhere.
  const std::string other = absl::StrCat(st.st_dev, ":", st.st_ino + 1);
  EXPECT_FALSE(IsJournalStream(other.c_str(), fds[1]));
  for (const char* bad : {"", "1", "1:", ":2", "1:2:3", "a:b", "1:2x"}) {
    EXPECT_FALSE(IsJournalStream(bad, fds[1])) << bad;
  }
  EXPECT_FALSE(IsJournalStream(nullptr, fds[1]));
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(LogSetupTest, JournalLinesStartWithTheirPriority) {
  auto journal = JournalFormatter();
  EXPECT_EQ(Format(*journal, spdlog::level::critical), "<2>hello\n");
  EXPECT_EQ(Format(*journal, spdlog::level::err), "<3>hello\n");
  EXPECT_EQ(Format(*journal, spdlog::level::warn), "<4>hello\n");
  EXPECT_EQ(Format(*journal, spdlog::level::info), "<6>hello\n");
  EXPECT_EQ(Format(*journal, spdlog::level::debug), "<7>hello\n");
  EXPECT_EQ(Format(*journal, spdlog::level::trace), "<7>hello\n");
}

TEST(LogSetupTest, TerminalLinesCarryTimeLevelAndPid) {
  auto terminal = TerminalFormatter();
  const std::string line = Format(*terminal, spdlog::level::warn);
  EXPECT_THAT(line, ::testing::MatchesRegex(
                        "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+ warning "
                        "rdmad\\[[0-9]+\\]: hello\n"));
}

}  // namespace
}  // namespace rdmad::startup
