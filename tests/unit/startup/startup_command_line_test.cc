// rdmad's command line checks (daemon/startup/command_line.h): every
// mistake is caught before absl's parser (which exits 1) sees it.
#include "daemon/startup/command_line.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::startup {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kFlags = {"socket", "peer_listen", "config",
                                         "log_level"};

absl::StatusOr<CommandLineAction> Check(const std::vector<std::string>& args) {
  return CheckCommandLine(
      args,
      [](absl::string_view name) {
        for (const std::string& flag : kFlags) {
          if (flag == name) return true;
        }
        return false;
      },
      kFlags);
}

TEST(CommandLineTest, KnownFlagsRun) {
  EXPECT_EQ(*Check({}), CommandLineAction::kRun);
  EXPECT_EQ(*Check({"--socket", "/tmp/s", "--peer_listen=1.2.3.4:5"}),
            CommandLineAction::kRun);
  EXPECT_EQ(*Check({"-socket=/tmp/s"}), CommandLineAction::kRun);
  EXPECT_EQ(*Check({"--config", "x", "--"}), CommandLineAction::kRun);
}

TEST(CommandLineTest, HelpAndVersionWin) {
  EXPECT_EQ(*Check({"--help"}), CommandLineAction::kHelp);
  EXPECT_EQ(*Check({"-h"}), CommandLineAction::kHelp);
  EXPECT_EQ(*Check({"--socket", "x", "--helpfull"}), CommandLineAction::kHelp);
  EXPECT_EQ(*Check({"--version"}), CommandLineAction::kVersion);
}

TEST(CommandLineTest, MistakesAreNamed) {
  auto typo = Check({"--peer_lisen=x"});
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(typo.status().message(), HasSubstr("unknown flag '--peer_lisen'"));
  EXPECT_THAT(typo.status().message(), HasSubstr("did you mean --peer_listen?"));
  auto far = Check({"--frobnicate"});
  ASSERT_FALSE(far.ok());
  EXPECT_THAT(far.status().message(), ::testing::Not(HasSubstr("did you mean")));
  auto no_value = Check({"--log_level"});
  ASSERT_FALSE(no_value.ok());
  EXPECT_THAT(no_value.status().message(), HasSubstr("--log_level needs a value"));
  auto argument = Check({"serve"});
  ASSERT_FALSE(argument.ok());
  EXPECT_THAT(argument.status().message(), HasSubstr("takes no arguments"));
  EXPECT_FALSE(Check({"--", "serve"}).ok());
  EXPECT_FALSE(Check({"-"}).ok());
  EXPECT_FALSE(Check({"--="}).ok());
}

TEST(CommandLineTest, HelpTextListsFlagsWrapped) {
  const std::string text = HelpText(
      "Usage: rdmad [...]",
      {{"socket", "the Local socket"},
       {"config", std::string(100, 'x') + " and more words here"}});
  EXPECT_THAT(text, HasSubstr("Usage: rdmad"));
  // Sorted by name.
  EXPECT_LT(text.find("--config"), text.find("--socket"));
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.find("xxxx") != absl::string_view::npos) continue;  // one word
    EXPECT_LE(line.size(), 80u) << line;
  }
  EXPECT_THAT(text, HasSubstr("Exit status"));
}

}  // namespace
}  // namespace rdmad::startup
