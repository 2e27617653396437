#include "daemon/startup/ephemeral_port.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace rdmad::startup {
namespace {

// Stands for a listener: the port the "kernel" handed it, and how many are
// open at once (a refused one must stay open while the next is started).
struct FakeServer {
  explicit FakeServer(uint16_t p, int* open) : port_(p), open_(open) {
    ++*open_;
  }
  ~FakeServer() { --*open_; }
  uint16_t port() const { return port_; }
  uint16_t port_;
  int* open_;
};

class Kernel {
 public:
  explicit Kernel(std::vector<uint16_t> ports) : ports_(std::move(ports)) {}
  absl::StatusOr<std::unique_ptr<FakeServer>> Start() {
    ++calls;
    max_open = std::max(max_open, open + 1);
    if (next_ >= ports_.size()) return absl::UnavailableError("no port left");
    return std::make_unique<FakeServer>(ports_[next_++], &open);
  }
  int calls = 0;
  int open = 0;
  int max_open = 0;

 private:
  std::vector<uint16_t> ports_;
  size_t next_ = 0;
};

TEST(StartAvoidingPortsTest, APortNotToAvoidIsKeptAtOnce) {
  Kernel kernel({40000});
  auto server = StartAvoidingPorts<FakeServer>(
      [&] { return kernel.Start(); }, {7471});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->port(), 40000);
  EXPECT_EQ(kernel.calls, 1);
}

TEST(StartAvoidingPortsTest, APortToAvoidIsHeldWhileAnotherIsTaken) {
  Kernel kernel({39215, 39216, 41000});
  auto server = StartAvoidingPorts<FakeServer>(
      [&] { return kernel.Start(); }, {39215, 39216});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->port(), 41000);
  EXPECT_EQ(kernel.calls, 3);
  EXPECT_EQ(kernel.max_open, 3) << "refused listeners stay open meanwhile";
  EXPECT_EQ(kernel.open, 1) << "and are closed once one is kept";
}

TEST(StartAvoidingPortsTest, GivesUpAfterTheLastAttemptWithWhatItGot) {
  Kernel kernel({7471, 7471, 7471, 7471});
  auto server = StartAvoidingPorts<FakeServer>(
      [&] { return kernel.Start(); }, {7471}, 3);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->port(), 7471) << "the later listener reports the clash";
  EXPECT_EQ(kernel.calls, 3);
  EXPECT_EQ(kernel.open, 1);
}

TEST(StartAvoidingPortsTest, AnErrorIsReturnedAsIs) {
  Kernel kernel({7471});
  auto server = StartAvoidingPorts<FakeServer>(
      [&] { return kernel.Start(); }, {7471});
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(kernel.open, 0);
}

}  // namespace
}  // namespace rdmad::startup
