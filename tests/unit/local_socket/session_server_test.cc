// SessionServer: the bounds on what sessions make the daemon hold in
// descriptors. A session that asks for more region descriptors than it
// receives is ended (its buffers freed, its token revoked, told why) while
// another session carries on; the sessions of one uid share a bound; and
// running out of descriptors pauses accepting instead of spinning.
#include "daemon/local_socket/session_server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/session_wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sanitized.h"

namespace rdmad::local_socket {
namespace {

using session_wire::Message;
using session_wire::MessageType;
using ::testing::HasSubstr;

class SessionServerTest : public ::testing::Test {
 protected:
  void Start(SessionLimits limits) {
    char dir[] = "/tmp/rdmad-sessions-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    server_ = std::make_unique<SessionServer>(dir_ + "/s.sock.session",
                                              &sessions_, &regions_, limits);
    ASSERT_TRUE(server_->Start(0600).ok());
  }
  void TearDown() override {
    if (server_) server_->Stop();
    ::rmdir(dir_.c_str());
  }

  struct Client {
    UniqueFd fd;
    uint64_t session_id = 0;
    std::string token;
    uint64_t buffer_id = 0;
  };

  // Connects, reads the greeting and gives the session a 4 KiB buffer.
  Client Open() {
    Client c;
    c.fd.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, server_->path().c_str(),
                 sizeof(addr.sun_path) - 1);
    EXPECT_EQ(
        ::connect(c.fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
        0);
    auto hello = session_wire::Receive(c.fd.get(), absl::Seconds(30));
    EXPECT_TRUE(hello.ok()) << hello.status();
    if (!hello.ok()) return c;
    c.session_id = hello->a;
    c.token = hello->text;
    auto caller = sessions_.Authenticate(c.token);
    EXPECT_TRUE(caller.ok());
    core::AllocateOptions options;
    options.size = 4096;
    auto buffer = regions_.Allocate(*caller, options);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (buffer.ok()) c.buffer_id = (*buffer)->id();
    return c;
  }

  // Asks for the buffer's descriptor `n` times without reading an answer.
  static void Hoard(const Client& c, int n) {
    Message request;
    request.type = MessageType::kGetFd;
    request.a = c.buffer_id;
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(session_wire::Send(c.fd.get(), request).ok());
    }
  }

  // Waits (30 s at most) until `token` is no longer a session.
  bool Ended(const std::string& token) {
    const absl::Time until = absl::Now() + absl::Seconds(30);
    while (absl::Now() < until) {
      if (!sessions_.Authenticate(token).ok()) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }

  std::string dir_;
  core::SessionTable sessions_;
  core::NullRegistrar registrar_;
  core::RegionTable regions_{&registrar_, core::RegionLimits{}};
  std::unique_ptr<SessionServer> server_;
};

TEST_F(SessionServerTest, HoardingSessionIsEndedOthersAreNot) {
  SessionLimits limits;
  limits.max_fds_in_flight_per_session = 4;
  limits.max_fds_in_flight_per_uid = 100;
  Start(limits);
  Client hoarder = Open();
  Client honest = Open();
  Hoard(hoarder, 10);
  ASSERT_TRUE(Ended(hoarder.token));
  // Its buffer went with it.
  EXPECT_EQ(regions_.FindForUse(core::Caller{}, {hoarder.buffer_id, ""})
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  // It got what was in its bound, then why it was ended.
  int fds = 0;
  std::string why;
  for (;;) {
    auto m = session_wire::Receive(hoarder.fd.get(), absl::Seconds(5));
    if (!m.ok()) break;
    if (m->type == MessageType::kFd) ++fds;
    if (m->type == MessageType::kError) {
      why = m->text;
      break;
    }
  }
  EXPECT_EQ(fds, 4);
  EXPECT_THAT(why, HasSubstr("without receiving"));
  // The honest session receives what it asks for, again and again.
  for (int i = 0; i < 10; ++i) {
    Hoard(honest, 1);
    auto m = session_wire::Receive(honest.fd.get(), absl::Seconds(30));
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->type, MessageType::kFd);
    EXPECT_TRUE(m->fd.valid());
  }
  EXPECT_TRUE(sessions_.Authenticate(honest.token).ok());
}

TEST_F(SessionServerTest, SessionsOfOneUidShareTheirBound) {
  SessionLimits limits;
  limits.max_fds_in_flight_per_session = 100;
  limits.max_fds_in_flight_per_uid = 6;
  Start(limits);
  Client first = Open();
  Hoard(first, 10);  // gets 6, the uid's bound, then is ended
  ASSERT_TRUE(Ended(first.token));
  // Its socket is kept, and its 6 still charged to the uid, until what it
  // has in flight is gone: another session of the uid is ended at its
  // first request.
  Client second = Open();
  Hoard(second, 1);
  ASSERT_TRUE(Ended(second.token));
  // Once the hoarder and its follower close their sockets, the uid's
  // bound is free again.
  first.fd.reset();
  second.fd.reset();
  absl::SleepFor(absl::Milliseconds(100));  // let the server see the closes
  const absl::Time until = absl::Now() + absl::Seconds(30);
  for (;;) {
    Client next = Open();
    Hoard(next, 1);
    auto m = session_wire::Receive(next.fd.get(), absl::Seconds(30));
    ASSERT_TRUE(m.ok()) << m.status();
    if (m->type == MessageType::kFd) break;  // served
    ASSERT_LT(absl::Now(), until) << "the uid's bound was never released";
    absl::SleepFor(absl::Milliseconds(50));
  }
}

TEST_F(SessionServerTest, SessionsPerUidAreBounded) {
  SessionLimits limits;
  limits.max_sessions_per_uid = 2;
  Start(limits);
  Client a = Open();
  Client b = Open();
  UniqueFd c(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, server_->path().c_str(),
               sizeof(addr.sun_path) - 1);
  ASSERT_EQ(
      ::connect(c.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  auto refused = session_wire::Receive(c.get(), absl::Seconds(30));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->type, MessageType::kError);
  EXPECT_THAT(refused->text, HasSubstr("sessions open"));
  EXPECT_EQ(sessions_.size(), 2u);
}

// Out of descriptors: the loop pauses accepting rather than spin on a
// listener that stays readable. Run in a child process, whose descriptor
// limit can be lowered without touching the test runner's.
TEST(SessionServerLimitsTest, OutOfDescriptorsDoesNotSpin) {
#ifdef RDMAD_SANITIZED
  GTEST_SKIP() << "the sanitizers' runtimes need descriptors of their own, "
                  "which this test takes away";
#endif
  char dir[] = "/tmp/rdmad-sessions-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/s.sock.session";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Its warnings go nowhere: a spinning loop writing to a pipe nobody
    // reads fast would block, and not show as CPU.
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    ::dup2(null, STDERR_FILENO);
    ::close(null);
    core::SessionTable sessions;
    core::NullRegistrar registrar;
    core::RegionTable regions(&registrar, core::RegionLimits{});
    SessionServer server(path, &sessions, &regions);
    if (!server.Start(0600).ok()) ::_exit(2);
    // Client sockets first; then no descriptor left at all (every number
    // below the lowered limit taken); then they connect (which takes
    // none), so that every accept fails.
    std::vector<int> clients;
    for (int i = 0; i < 4; ++i) {
      clients.push_back(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    }
    int open_now = 0;
    for (int fd = 0; fd < 4096; ++fd) {
      if (::fcntl(fd, F_GETFD) >= 0) open_now = fd + 1;
    }
    const rlimit low{static_cast<rlim_t>(open_now),
                     static_cast<rlim_t>(open_now)};
    if (::setrlimit(RLIMIT_NOFILE, &low) != 0) ::_exit(3);
    while (::dup(clients[0]) >= 0) {
    }
    for (int fd : clients) {
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
          0) {
        ::_exit(5);
      }
    }
    rusage before{};
    ::getrusage(RUSAGE_SELF, &before);
    ::sleep(2);
    rusage after{};
    ::getrusage(RUSAGE_SELF, &after);
    const double cpu =
        (after.ru_utime.tv_sec - before.ru_utime.tv_sec) +
        (after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
        (after.ru_utime.tv_usec - before.ru_utime.tv_usec) / 1e6 +
        (after.ru_stime.tv_usec - before.ru_stime.tv_usec) / 1e6;
    server.Stop();
    // A spinning loop burns what CPU it gets (over a second of the 2 s on
    // an idle core, a good part of it on a loaded one); a paused one wakes
    // ten times a second for nothing: milliseconds.
    ::_exit(cpu < 0.25 ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::rmdir(dir);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "2: could not start, 3: could not lower the limit, 4: the accept "
         "loop spun, 5: could not connect";
}

}  // namespace
}  // namespace rdmad::local_socket
