// rdmad speaks systemd's notify protocol: the test plays systemd with an
// AF_UNIX datagram socket of its own as $NOTIFY_SOCKET, and checks that
// READY=1 comes only once the Local socket and the Peer port accept
// connections, that WATCHDOG=1 keeps coming when $WATCHDOG_USEC asks for it
// (with $WATCHDOG_PID naming the daemon, as systemd sets it), and that
// SIGTERM brings STOPPING=1 and a clean exit.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

// One end of the notify protocol: a bound datagram socket.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    bound_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr),
                                sizeof(addr)) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }

  // Waits (up to `timeout`) for a datagram with a line equal to `wanted`;
  // returns that datagram, or "" on timeout. Every datagram read is kept in
  // seen().
  std::string WaitFor(const std::string& wanted, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return "";
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) +
                              1) <= 0) {
        continue;
      }
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) continue;
      std::string message(buf, static_cast<size_t>(n));
      seen_.push_back(message);
      for (absl::string_view line : absl::StrSplit(message, '\n')) {
        if (line == wanted) return message;
      }
    }
  }
  const std::vector<std::string>& seen() const { return seen_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
  std::vector<std::string> seen_;
};

bool UnixConnects(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool ok =
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

bool TcpConnects(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(host_port.substr(colon + 1), &port)) {
    return false;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host_port.substr(0, colon).c_str(),
                  &addr.sin_addr) != 1) {
    return false;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool ok =
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// The value of KEY=... in a notify datagram.
std::string Field(const std::string& message, const std::string& key) {
  for (absl::string_view line : absl::StrSplit(message, '\n')) {
    if (absl::ConsumePrefix(&line, key + "=")) return std::string(line);
  }
  return "";
}

// Runs rdmad through `sh -c 'WATCHDOG_PID=$$ exec rdmad ...'`: exec keeps the
// shell's pid, so WATCHDOG_PID names the daemon exactly as systemd would set
// it.
absl::StatusOr<std::unique_ptr<ChildProcess>> StartNotifyingDaemon(
    const TempDir& dir, const NotifySocket& notify, const std::string& socket,
    const std::string& watchdog_usec) {
  std::string env = absl::StrCat("NOTIFY_SOCKET='", notify.path(), "'");
  if (!watchdog_usec.empty()) {
    absl::StrAppend(&env, " WATCHDOG_USEC=", watchdog_usec,
                    " WATCHDOG_PID=$$");
  }
  const std::string command = absl::StrCat(
      "exec env ", env, " '", RdmadBinary(), "' --socket '", socket,
      "' --peer_listen 127.0.0.1:0 --transport tcp --log_level debug");
  return ChildProcess::Spawn({"/bin/sh", "-c", command},
                             absl::StrCat(dir.path(), "/rdmad.log"));
}

TEST(NotifyTest, ReadyOnlyWhenListeningThenWatchdogThenStopping) {
  TempDir dir;
  NotifySocket notify(absl::StrCat(dir.path(), "/notify.sock"));
  ASSERT_TRUE(notify.bound()) << std::strerror(errno);
  const std::string socket = absl::StrCat(dir.path(), "/rdmad.sock");
  // 2 s: a ping (each after a self-check with a 500 ms budget) every
  // second, generous enough for a sanitizer build on a busy machine.
  auto daemon = StartNotifyingDaemon(dir, notify, socket, "2000000");
  ASSERT_TRUE(daemon.ok()) << daemon.status();

  const std::string ready = notify.WaitFor("READY=1", absl::Seconds(30));
  ASSERT_FALSE(ready.empty()) << "no READY=1 from rdmad";
  // At the moment READY=1 is read, both servers must already accept.
  EXPECT_TRUE(UnixConnects(socket)) << "Local socket not accepting at READY";
  const std::string status = Field(ready, "STATUS");
  const size_t at = status.rfind("peer ");
  ASSERT_NE(at, std::string::npos) << "STATUS without the peer address: "
                                   << status;
  const std::string peer = status.substr(at + 5);
  EXPECT_TRUE(TcpConnects(peer)) << "Peer port " << peer
                                 << " not accepting at READY";

  EXPECT_FALSE(notify.WaitFor("WATCHDOG=1", absl::Seconds(30)).empty())
      << "no WATCHDOG=1 although WATCHDOG_USEC and WATCHDOG_PID ask for it";

  (*daemon)->Signal(SIGTERM);
  EXPECT_FALSE(notify.WaitFor("STOPPING=1", absl::Seconds(30)).empty())
      << "no STOPPING=1 after SIGTERM";
  auto exited = (*daemon)->Wait(absl::Seconds(30));
  ASSERT_TRUE(exited.ok()) << exited.status();
  EXPECT_TRUE(WIFEXITED(*exited) && WEXITSTATUS(*exited) == 0);
}

TEST(NotifyTest, NoWatchdogUnlessAsked) {
  // Without $WATCHDOG_USEC the daemon must not ping: the whole life, from
  // start to STOPPING=1, carries no WATCHDOG=1.
  TempDir dir;
  NotifySocket notify(absl::StrCat(dir.path(), "/notify.sock"));
  ASSERT_TRUE(notify.bound());
  const std::string socket = absl::StrCat(dir.path(), "/rdmad.sock");
  auto daemon = StartNotifyingDaemon(dir, notify, socket, "");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ASSERT_FALSE(notify.WaitFor("READY=1", absl::Seconds(30)).empty());
  (*daemon)->Signal(SIGTERM);
  ASSERT_FALSE(notify.WaitFor("STOPPING=1", absl::Seconds(30)).empty());
  auto exited = (*daemon)->Wait(absl::Seconds(30));
  ASSERT_TRUE(exited.ok()) << exited.status();
  for (const std::string& message : notify.seen()) {
    EXPECT_EQ(Field(message, "WATCHDOG"), "")
        << "WATCHDOG=1 sent without WATCHDOG_USEC";
  }
}

}  // namespace
}  // namespace rdmad::testing
