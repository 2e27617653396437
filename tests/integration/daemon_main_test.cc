// The rdmad binary's start and stop, as an operator meets them:
//   - a malformed config (of any kind: syntax, values, peer allow-list,
//     socket group, TLS files, addresses) stops it with exit status 2 and
//     FILE:LINE:COLUMN naming the field; a directory given as --config too;
//   - --check-config validates a file and starts nothing (exit 0 or 2);
//   - under journald each line carries its syslog priority, no timestamp;
//   - a start that cannot make its socket exits 2 without a "stopped";
//   - a state_dir it must refuse (others can write it, another owner, a
//     relative path) exits with status 2 as well;
//   - SIGTERM ends an idle daemon promptly even with a client connected and
//     idle (it used to wait out the whole 5 s grace period).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;

class DaemonMainTest : public ::testing::Test {
 protected:
  // Runs rdmad with `config_text` as its config file (`flags` after).
  ProcessResult RunWithConfig(const std::string& name,
                              const std::string& config_text) {
    const std::string path = absl::StrCat(dir_.path(), "/", name, ".conf");
    std::ofstream(path) << config_text;
    return RunProcess(
        {RdmadBinary(), "--socket",
         absl::StrCat(dir_.path(), "/", name, ".sock"), "--peer_listen",
         "127.0.0.1:0", "--transport", "tcp", "--config", path},
        "", absl::Seconds(60));
  }

  TempDir dir_;
};

TEST_F(DaemonMainTest, MalformedConfigExitsTwoNamingFileLineAndColumn) {
  const std::string not_pem = dir_.path() + "/not.pem";
  std::ofstream(not_pem) << "plain text\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"syntax", "log_level: \"info\"\npeer_listen \"127.0.0.1:1\n"},
      {"unknown", "log_level: \"info\"\nno_such_field: 1\n"},
      {"twice", "log_level: \"info\"\nlog_level: \"warn\"\n"},
      {"range", "log_level: \"info\"\nqp_timeout: 99\n"},
      {"allow", "log_level: \"info\"\npeer_allow: \"10.0.0.0/99\"\n"},
      {"group", "log_level: \"info\"\nsocket_group: \"no-such-group-rdmad\"\n"},
      {"tls_half",
       absl::StrCat("log_level: \"info\"\ntls_ca_file: \"", not_pem, "\"\n")},
      {"tls_pem", absl::StrCat("log_level: \"info\"\ntls_ca_file: \"", not_pem,
                               "\"\ntls_cert_file: \"", not_pem,
                               "\"\ntls_key_file: \"", not_pem, "\"\n")},
      {"host", "log_level: \"info\"\nadvertise_address: \"a b:7471\"\n"},
      {"mode", "log_level: \"info\"\nsocket_mode: \"7777\"\n"},
  };
  const std::regex location(".*\\.conf:[0-9]+:[0-9]+: .*");
  for (const auto& [name, text] : cases) {
    SCOPED_TRACE(name);
    ProcessResult r = RunWithConfig(name, text);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat(name, ".conf:")));
    EXPECT_TRUE(std::regex_search(r.err, location)) << r.err;
  }
}

TEST_F(DaemonMainTest, DirectoryAsConfigIsRefused) {
  ProcessResult r = RunProcess(
      {RdmadBinary(), "--socket", dir_.path() + "/d.sock", "--peer_listen",
       "127.0.0.1:0", "--transport", "tcp", "--config", dir_.path()},
      "", absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("is a directory"));
}

TEST_F(DaemonMainTest, CheckConfigValidatesWithoutStartingAnything) {
  const std::string good = dir_.path() + "/good.conf";
  std::ofstream(good) << "log_level: \"warn\"\nmax_pinned_bytes: 4G\n"
                      << "socket: \"" << dir_.path() << "/never.sock\"\n";
  const std::string bad = dir_.path() + "/bad.conf";
  std::ofstream(bad) << "log_level: \"warn\"\npeer_listen: 127.0.0.1:7471\n";
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{"--check-config", good},
                                             {"--check-config=" + good},
                                             {"--check_config", good}}) {
    std::vector<std::string> argv = {RdmadBinary()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    ProcessResult r = RunProcess(argv, "", absl::Seconds(60));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("configuration is valid"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/never.sock"));
  ProcessResult r =
      RunProcess({RdmadBinary(), "--check-config", bad}, "", absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("bad.conf:2:"));
  EXPECT_THAT(r.err, HasSubstr("quote the value: peer_listen: "
                               "\"127.0.0.1:7471\""));
}

TEST_F(DaemonMainTest, UnderJournaldEachLineCarriesItsPriorityOnly) {
  const std::string conf = dir_.path() + "/j.conf";
  std::ofstream(conf) << "log_level: \"info\"\nqp_timeout: 99\n";
  const std::string log = dir_.path() + "/journal.log";
  // As systemd starts it: stderr is the journal's stream, and
  // JOURNAL_STREAM names that stream's device and inode. The second run's
  // variable names another file (an inherited one): the usual format.
  for (const bool journal : {true, false}) {
    SCOPED_TRACE(journal ? "journal" : "inherited variable");
    const std::string stream =
        journal ? "$(stat -c %d:%i \"$0\")" : std::string("1:2");
    ProcessResult r = RunProcess(
        {"/bin/sh", "-c",
         absl::StrCat("exec 2>\"$0\"; JOURNAL_STREAM=", stream,
                      " exec \"$@\""),
         log, RdmadBinary(), "--socket", dir_.path() + "/j.sock",
         "--peer_listen", "127.0.0.1:0", "--transport", "tcp", "--config",
         conf},
        "", absl::Seconds(60));
    EXPECT_EQ(r.exit_code, 2);
    std::ifstream in(log);
    std::string line;
    ASSERT_TRUE(std::getline(in, line));
    if (journal) {
      EXPECT_THAT(line, ::testing::StartsWith("<2>" + conf + ":2:"));
      EXPECT_THAT(line, ::testing::Not(HasSubstr("rdmad[")));
    } else {
      EXPECT_THAT(line, HasSubstr("critical"));
      EXPECT_THAT(line, HasSubstr("rdmad["));
    }
  }
}

TEST_F(DaemonMainTest, AStartThatCannotMakeItsSocketExitsTwoQuietly) {
  // The socket's directory cannot be made: a regular file is in the way.
  const std::string file = dir_.path() + "/not-a-dir";
  std::ofstream(file) << "x";
  ProcessResult r = RunProcess(
      {RdmadBinary(), "--socket", file + "/rdmad.sock", "--peer_listen",
       "127.0.0.1:0", "--transport", "tcp"},
      "", absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cannot start"));
  // It never ran: no "stopped" line before the reason.
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("stopped"))) << r.err;
}

// A state_dir the daemon must refuse is a configuration error like any
// other: exit status 2, which the unit does not restart (a restart would
// refuse it again).
TEST_F(DaemonMainTest, RefusedStateDirExitsTwo) {
  const std::string open_dir = dir_.path() + "/open";
  ASSERT_EQ(::mkdir(open_dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open_dir.c_str(), 0777), 0);
  std::vector<std::pair<std::string, std::string>> cases = {
      {"others_can_write", open_dir}, {"relative", "relative/state"}};
  if (::geteuid() == 0) {
    const std::string theirs = dir_.path() + "/theirs";
    ASSERT_EQ(::mkdir(theirs.c_str(), 0700), 0);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    cases.emplace_back("another_owner", theirs);
  }
  for (const auto& [name, state_dir] : cases) {
    SCOPED_TRACE(name);
    ProcessResult r =
        RunWithConfig(name, absl::StrCat("state_dir: \"", state_dir, "\"\n"));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr("state_dir"));
  }
}

TEST_F(DaemonMainTest, SigtermEndsAnIdleDaemonPromptlyWithAClientConnected) {
  auto daemon = DaemonProcess::Start(dir_.path(), "idle");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  // An idle client with an open gRPC connection and a session.
  auto client = Connect(**daemon);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->GetStatus().ok());
  auto buffer = client->Allocate(4096);
  ASSERT_TRUE(buffer.ok());
  const absl::Time start = absl::Now();
  auto status = (*daemon)->Stop();
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
  // It takes milliseconds; the bound only has to tell that apart from the
  // 5 s grace period it used to wait out, on however loaded a machine.
  EXPECT_LT(took, absl::Seconds(4)) << (*daemon)->LogTail();
  RecordProperty("sigterm_to_exit_ms",
                 static_cast<int>(absl::ToInt64Milliseconds(took)));
}

}  // namespace
}  // namespace rdmad::testing
