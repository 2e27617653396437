// Taken ports at start (daemon/startup/port_check.h): who holds a port, from
// a /proc tree made by the test, and whether a real port on loopback is
// free.
#include "daemon/startup/port_check.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::startup {
namespace {

using ::testing::HasSubstr;

class FakeProc {
 public:
  FakeProc() {
    char pattern[] = "/tmp/rdmad-proc-XXXXXX";
    root_ = ::mkdtemp(pattern);
    std::filesystem::create_directories(root_ + "/net");
  }
  ~FakeProc() { std::filesystem::remove_all(root_); }

  void Table(const std::string& name, const std::string& rows) {
    std::ofstream(absl::StrCat(root_, "/net/", name))
        << "  sl  local_address rem_address   st tx_queue rx_queue tr "
           "tm->when retrnsmt   uid  timeout inode\n"
        << rows;
  }
  void Process(int pid, const std::string& comm, int fd,
               const std::string& target) {
    const std::string dir = absl::StrCat(root_, "/", pid);
    std::filesystem::create_directories(dir + "/fd");
    std::ofstream(dir + "/comm") << comm << "\n";
    std::filesystem::create_symlink(target, absl::StrCat(dir, "/fd/", fd));
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(FindPortHolderTest, FindsTheListenerAndItsProcess) {
  FakeProc proc;
  // 127.0.0.1:7471 (0x1D2F) listening (0A), inode 4242; the same port in
  // TIME_WAIT (06) with another inode must not count.
  proc.Table("tcp",
             "   0: 0100007F:1D2F 00000000:0000 0A 00000000:00000000 "
             "00:00000000 00000000     0        0 4242 1 0000 100 0 0 10 0\n"
             "   1: 0100007F:1D2F 0100007F:9C40 06 00000000:00000000 "
             "00:00000000 00000000     0        0 9999 1 0000 100 0 0 10 0\n");
  proc.Table("tcp6", "");
  proc.Process(1234, "rdmad", 7, "socket:[4242]");
  proc.Process(99, "other", 3, "socket:[9999]");
  auto holder = FindPortHolder(7471, proc.root());
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->pid, 1234);
  EXPECT_EQ(holder->command, "rdmad");
  EXPECT_FALSE(FindPortHolder(7472, proc.root()).has_value());
}

TEST(FindPortHolderTest, SeesIpv6Listeners) {
  FakeProc proc;
  proc.Table("tcp", "");
  proc.Table("tcp6",
             "   0: 00000000000000000000000000000000:24F7 "
             "00000000000000000000000000000000:0000 0A 00000000:00000000 "
             "00:00000000 00000000     0        0 777 1 0000 100 0 0 10 0\n");
  proc.Process(55, "metrics", 4, "socket:[777]");
  auto holder = FindPortHolder(9463, proc.root());
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->pid, 55);
}

TEST(FindPortHolderTest, UnknownHolderIsNullopt) {
  FakeProc proc;
  proc.Table("tcp",
             "   0: 0100007F:1D2F 00000000:0000 0A 00000000:00000000 "
             "00:00000000 00000000     0        0 4242 1 0000 100 0 0 10 0\n");
  // Nobody visible holds inode 4242 (another user's process).
  EXPECT_FALSE(FindPortHolder(7471, proc.root()).has_value());
  EXPECT_FALSE(FindPortHolder(7471, "/nonexistent").has_value());
}

TEST(CheckPortFreeTest, ATakenLoopbackPortIsNamedWithItsHolder) {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr),
                   sizeof(addr)),
            0);
  ASSERT_EQ(::listen(listener.get(), 1), 0);
  socklen_t length = sizeof(addr);
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &length);
  const std::string taken = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  absl::Status status = CheckPortFree("peers", "--peer_listen", taken);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("cannot listen on ", taken,
                                     " for peers (--peer_listen)")));
  // This very process holds it.
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("pid ", ::getpid())));
  EXPECT_EQ(ListenFailure("peers", "--peer_listen", taken).code(),
            absl::StatusCode::kAlreadyExists);
  // Port 0 is always free; once closed, so is the port.
  EXPECT_TRUE(CheckPortFree("peers", "--peer_listen", "127.0.0.1:0").ok());
  listener.reset();
  EXPECT_TRUE(CheckPortFree("peers", "--peer_listen", taken).ok());
  EXPECT_EQ(ListenFailure("peers", "--peer_listen", taken).code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace rdmad::startup
