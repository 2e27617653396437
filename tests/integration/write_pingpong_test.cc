// bench/write_pingpong (rdmad_write_pingpong) between two real daemons:
// every message of the ping-pong arrives whole (the bench fails otherwise)
// and its report is complete, so the lab's one-way latency figure
// (bench/verbs_lab.sh) comes from a program that works. The same runs over
// verbs in the lab with RDMAD_TEST_TRANSPORT=verbs.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

class WritePingPongTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = DaemonProcess::Start(dir_.path(), "a");
    ASSERT_TRUE(a.ok()) << a.status();
    a_ = *std::move(a);
    auto b = DaemonProcess::Start(dir_.path(), "b");
    ASSERT_TRUE(b.ok()) << b.status();
    b_ = *std::move(b);
  }

  ProcessResult Run(const std::string& peer_a, const std::string& iters) {
    return RunProcess({WRITE_PINGPONG_PATH, "--socket-a", a_->socket(),
                       "--socket-b", b_->socket(), "--peer-a", peer_a,
                       "--peer-b", b_->peer_address(), "--iters", iters,
                       "--warmup", "10", "--json"},
                      "", absl::Seconds(120));
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> a_, b_;
};

TEST_F(WritePingPongTest, EveryMessageArrivesAndIsTimed) {
  const ProcessResult r = Run(a_->peer_address(), "300");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"iters\": 300,"));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("\"transport\": \"",
                                            TestTransport(), "\"")));
  EXPECT_THAT(r.out, MatchesRegex(".*\"p50_us\": [0-9]+\\.[0-9]+, "
                                  "\"p99_us\": [0-9]+\\.[0-9]+.*\n"));
}

TEST_F(WritePingPongTest, AnUnreachablePeerFailsWithItsName) {
  const int port = FreeLoopbackPort();
  ASSERT_NE(port, 0);
  const std::string nobody = absl::StrCat("127.0.0.1:", port);
  const ProcessResult r = Run(nobody, "10");
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_THAT(r.err, HasSubstr(nobody));
}

TEST_F(WritePingPongTest, BadArgumentsAreRefusedWithUsage) {
  const ProcessResult r = RunProcess(
      {WRITE_PINGPONG_PATH, "--socket-a", a_->socket(), "--iters", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("usage: write_pingpong"));
}

}  // namespace
}  // namespace rdmad::testing
