// SystemdNotifier against a datagram socket standing in for systemd: the
// watchdog interval follows $WATCHDOG_USEC/$WATCHDOG_PID, the watchdog
// thread pings and stops when asked.
#include "daemon/process/notify.h"

#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace rdmad::process {
namespace {

class NotifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             absl::StrCat("rdmad-notify-", ::getpid(), ".sock"))
                .string();
    ::unlink(path_.c_str());
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              0)
        << std::strerror(errno);
    ::setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("WATCHDOG_USEC");
    ::unsetenv("WATCHDOG_PID");
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  // The next datagram, or "" after 10 s.
  std::string Receive() {
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, 10000) <= 0) return "";
    char buf[1024];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

  std::string path_;
  int fd_ = -1;
};

TEST_F(NotifierTest, ReadyCarriesStatusOnOneLine) {
  SystemdNotifier notifier;
  notifier.Ready("two\nlines");
  EXPECT_EQ(Receive(), "READY=1\nSTATUS=two lines");
  notifier.Stopping("bye");
  EXPECT_EQ(Receive(), "STOPPING=1\nSTATUS=bye");
}

TEST_F(NotifierTest, WatchdogIntervalIsHalfOfWatchdogUsec) {
  EXPECT_EQ(SystemdNotifier::WatchdogInterval(), absl::ZeroDuration());
  ::setenv("WATCHDOG_USEC", "3000000", 1);
  EXPECT_EQ(SystemdNotifier::WatchdogInterval(), absl::Milliseconds(1500));
  ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  EXPECT_EQ(SystemdNotifier::WatchdogInterval(), absl::Milliseconds(1500));
  // Inherited from a parent that systemd watches: not for this process.
  ::setenv("WATCHDOG_PID", std::to_string(::getppid()).c_str(), 1);
  EXPECT_EQ(SystemdNotifier::WatchdogInterval(), absl::ZeroDuration());
}

TEST_F(NotifierTest, WatchdogThreadPingsAndStops) {
  ::setenv("WATCHDOG_USEC", "20000", 1);
  ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  SystemdNotifier notifier;
  EXPECT_EQ(notifier.StartWatchdog(), absl::Milliseconds(10));
  EXPECT_EQ(Receive(), "WATCHDOG=1");
  EXPECT_EQ(Receive(), "WATCHDOG=1");
  notifier.StopWatchdog();
  notifier.StopWatchdog();  // idempotent
}

TEST_F(NotifierTest, WatchdogPingsOnlyWhileTheLivenessCheckPasses) {
  ::setenv("WATCHDOG_USEC", "20000", 1);
  ::setenv("WATCHDOG_PID", std::to_string(::getpid()).c_str(), 1);
  absl::Mutex mu;
  int calls = 0;
  bool healthy = false;
  SystemdNotifier notifier;
  notifier.StartWatchdog([&](absl::Duration budget) {
    absl::MutexLock lock(&mu);
    ++calls;
    EXPECT_EQ(budget, absl::Milliseconds(5));  // half the interval
    return healthy ? absl::OkStatus() : absl::UnavailableError("wedged");
  });
  {
    // Three failed checks, and not one ping for them: a ping would be in
    // the socket before the next check starts (datagrams are sent
    // synchronously).
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* n) { return *n >= 3; }, &calls));
  }
  pollfd pfd{fd_, POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 0), 0) << "pinged although the check failed";
  {
    absl::MutexLock lock(&mu);
    healthy = true;
  }
  EXPECT_EQ(Receive(), "WATCHDOG=1");
  notifier.StopWatchdog();
}

TEST_F(NotifierTest, NoWatchdogThreadWithoutWatchdogUsec) {
  SystemdNotifier notifier;
  EXPECT_EQ(notifier.StartWatchdog(), absl::ZeroDuration());
  notifier.Status("still here");
  // The only datagram is the status: no ping was sent before it.
  EXPECT_EQ(Receive(), "STATUS=still here");
}

}  // namespace
}  // namespace rdmad::process
