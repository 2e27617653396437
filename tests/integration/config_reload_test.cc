// SIGHUP re-reads the config file: reloadable fields take effect at once,
// others are logged as needing a restart, a broken file changes nothing,
// and the daemon keeps serving throughout.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// Waits until `log` holds `needle` at least `times` times.
bool WaitForLog(const std::string& log, const std::string& needle,
                int times = 1) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (Count(ReadTextFile(log), needle) >= times) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

class ConfigReloadTest : public ::testing::Test {
 protected:
  void WriteConfig(const std::string& log_level, const std::string& peer,
                   const std::string& extra = "") {
    std::ofstream out(conf_);
    out << "# written by config_reload_test\n"
        << "socket: \"" << socket_ << "\"\n"
        << "peer_listen: \"" << peer << "\"\n"
        << "transport: \"tcp\"\n"
        << "log_level: \"" << log_level << "\"\n"
        << extra;
  }

  // rdmad with --config only (DaemonProcess passes --log_level, which would
  // override the file's), ready once GetStatus answers from its pid.
  void StartDaemon() {
    auto child = ChildProcess::Spawn({RdmadBinary(), "--config", conf_}, log_);
    ASSERT_TRUE(child.ok()) << child.status();
    daemon_ = *std::move(child);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      auto status = GetStatus();
      if (status.ok()) {
        peer_at_start_ = status->peer_address;
        return;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    FAIL() << "rdmad did not start:\n" << ReadTextFile(log_);
  }

  absl::StatusOr<DaemonStatus> GetStatus() {
    auto client = Client::Connect({.socket_path = socket_,
                                   .timeout = absl::Seconds(5)});
    if (!client.ok()) return client.status();
    auto status = (*client)->GetStatus();
    if (status.ok() &&
        status->pid != static_cast<uint32_t>(daemon_->pid())) {
      return absl::UnavailableError("another daemon answered");
    }
    return status;
  }

  TempDir dir_;
  std::string conf_ = absl::StrCat(dir_.path(), "/rdmad.conf");
  std::string socket_ = absl::StrCat(dir_.path(), "/rdmad.sock");
  std::string log_ = absl::StrCat(dir_.path(), "/rdmad.log");
  std::string peer_at_start_;
  std::unique_ptr<ChildProcess> daemon_;
};

TEST_F(ConfigReloadTest, AppliesLogLevelAndReportsRestartOnlyFields) {
  WriteConfig("info", "127.0.0.1:0");
  StartDaemon();
  ASSERT_FALSE(peer_at_start_.empty());

  // log_level (reloadable) and peer_listen (restart only) change together.
  WriteConfig("warn", "127.0.0.1:1");
  daemon_->Signal(SIGHUP);
  ASSERT_TRUE(WaitForLog(log_, "config reload: peer_listen changed from "
                               "\"127.0.0.1:0\" to \"127.0.0.1:1\": needs a "
                               "restart of rdmad"))
      << ReadTextFile(log_);
  EXPECT_TRUE(absl::StrContains(ReadTextFile(log_),
                                "config reload: log_level changed from "
                                "\"info\" to \"warn\": applied"))
      << ReadTextFile(log_);
  EXPECT_EQ(Count(ReadTextFile(log_), "SIGHUP: reloading configuration"), 1);

  // Same file again: the level is warn now, so the info line announcing the
  // reload is gone while the warning about peer_listen still comes (it is
  // still not applied). The warning comes after the info line would have,
  // so waiting for it is enough.
  daemon_->Signal(SIGHUP);
  ASSERT_TRUE(WaitForLog(log_, "peer_listen changed from", 2))
      << ReadTextFile(log_);
  EXPECT_EQ(Count(ReadTextFile(log_), "SIGHUP: reloading configuration"), 1)
      << "log_level warn did not take effect:\n" << ReadTextFile(log_);

  // Still running, still on the port it started with.
  auto status = GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->peer_address, peer_at_start_);
}

TEST_F(ConfigReloadTest, SocketModeChangesOnBothSockets) {
  WriteConfig("info", "127.0.0.1:0", "socket_mode: \"0666\"\n");
  StartDaemon();
  const std::string session = absl::StrCat(socket_, ".session");
  auto mode = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0u;
  };
  EXPECT_EQ(mode(socket_), 0666u);
  EXPECT_EQ(mode(session), 0666u);

  WriteConfig("info", "127.0.0.1:0", "socket_mode: \"0660\"\n");
  daemon_->Signal(SIGHUP);
  ASSERT_TRUE(WaitForLog(log_, "config reload: socket_mode changed from "
                               "\"0666\" to \"0660\": applied"))
      << ReadTextFile(log_);
  EXPECT_EQ(mode(socket_), 0660u);
  EXPECT_EQ(mode(session), 0660u);
  // Root, or the owner here, still gets in.
  EXPECT_TRUE(GetStatus().ok());
}

TEST_F(ConfigReloadTest, BrokenFileChangesNothing) {
  WriteConfig("info", "127.0.0.1:0");
  StartDaemon();
  WriteConfig("info", "127.0.0.1:0", "qps_per_peer: \"many\"\n");
  daemon_->Signal(SIGHUP);
  ASSERT_TRUE(WaitForLog(log_, "config reload failed, nothing changed"))
      << ReadTextFile(log_);
  // The error names the file, the line (6: after five lines written above)
  // and the field.
  EXPECT_TRUE(absl::StrContains(ReadTextFile(log_), absl::StrCat(conf_, ":6:")))
      << ReadTextFile(log_);
  EXPECT_TRUE(absl::StrContains(ReadTextFile(log_), "qps_per_peer"));
  auto status = GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();

  daemon_->Signal(SIGTERM);
  auto exited = daemon_->Wait(absl::Seconds(30));
  ASSERT_TRUE(exited.ok()) << exited.status();
  EXPECT_TRUE(WIFEXITED(*exited) && WEXITSTATUS(*exited) == 0);
}

TEST_F(ConfigReloadTest, BadFileAtStartNamesFileLineAndField) {
  WriteConfig("info", "127.0.0.1:0", "qp_timeout: 99\n");
  auto result = RunProcess({RdmadBinary(), "--config", conf_});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(
      result.err, absl::StrCat(conf_, ":6:1: field 'qp_timeout': 99")))
      << result.err;
}

}  // namespace
}  // namespace rdmad::testing
