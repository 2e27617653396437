#include "common/session_wire.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace rdmad::session_wire {
namespace {

class SessionWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
    a_.reset(fds[0]);
    b_.reset(fds[1]);
  }
  UniqueFd a_, b_;
};

TEST_F(SessionWireTest, RoundTripWithText) {
  Message m;
  m.type = MessageType::kHello;
  m.a = 7;
  m.b = 0xfffffffffffffffful;
  m.text = "token";
  ASSERT_TRUE(Send(a_.get(), m).ok());
  auto got = Receive(b_.get(), absl::Seconds(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->type, MessageType::kHello);
  EXPECT_EQ(got->a, 7u);
  EXPECT_EQ(got->b, m.b);
  EXPECT_EQ(got->text, "token");
  EXPECT_FALSE(got->fd.valid());
}

TEST_F(SessionWireTest, PassesADescriptor) {
  UniqueFd memfd(::memfd_create("t", MFD_CLOEXEC));
  ASSERT_TRUE(memfd.valid());
  ASSERT_EQ(::write(memfd.get(), "abc", 3), 3);
  Message m;
  m.type = MessageType::kPassFd;
  ASSERT_TRUE(Send(a_.get(), m, memfd.get()).ok());
  auto got = Receive(b_.get(), absl::Seconds(1));
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->fd.valid());
  char buf[3];
  ASSERT_EQ(::pread(got->fd.get(), buf, 3, 0), 3);
  EXPECT_EQ(std::string(buf, 3), "abc");
}

TEST_F(SessionWireTest, ErrorsCarryTheirStatus) {
  ASSERT_TRUE(
      Send(a_.get(), ErrorMessage(absl::NotFoundError("no such region"))).ok());
  auto got = Receive(b_.get(), absl::Seconds(1));
  ASSERT_TRUE(got.ok());
  const absl::Status s = StatusFromError(*got);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no such region");
}

TEST_F(SessionWireTest, TimeoutAndClose) {
  EXPECT_EQ(Receive(b_.get(), absl::Milliseconds(20)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  a_.reset();
  EXPECT_EQ(Receive(b_.get(), absl::Seconds(1)).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(SessionWireTest, GarbageIsDataLoss) {
  for (const std::string& junk :
       {std::string("x"), std::string(32, '\0'), std::string(40, 'A')}) {
    ASSERT_EQ(::send(a_.get(), junk.data(), junk.size(), 0),
              static_cast<ssize_t>(junk.size()));
    EXPECT_EQ(Receive(b_.get(), absl::Seconds(1)).status().code(),
              absl::StatusCode::kDataLoss);
  }
}

TEST_F(SessionWireTest, OversizedTextIsRefused) {
  Message m;
  m.type = MessageType::kError;
  m.text = std::string(kMaxText + 1, 'x');
  EXPECT_EQ(Send(a_.get(), m).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rdmad::session_wire
