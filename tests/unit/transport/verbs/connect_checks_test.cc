// The serving side's checks on a verbs Peer.Connect (connect_checks.h),
// which VerbsAcceptor runs before it creates a QP: the shape of a request,
// and whether a grow fits the pool it is for.
#include "daemon/transport/verbs/connect_checks.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/transport/verbs/connect_rails.h"
#include "daemon/transport/verbs/rail_scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::verbs {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint32_t kMostPerRail = 64;  // VerbsTransportOptions' default

// A Connect from "10.0.0.2:7471" with `counts[r]` QP endpoints on rail r.
v1::ConnectRequest ConnectCarrying(const std::vector<int>& counts,
                                   bool grow = false) {
  v1::ConnectRequest request;
  request.set_address("10.0.0.2:7471");
  request.set_grow(grow);
  for (size_t r = 0; r < counts.size(); ++r) {
    auto* qps = RailQps(&request, r);
    for (int i = 0; i < counts[r]; ++i) {
      v1::QpEndpoint* e = qps->Add();
      e->set_qpn(0x100 + static_cast<uint32_t>(i));
      e->set_gid(std::string(16, '\1'));
      e->set_mtu(1024);
    }
  }
  return request;
}

TEST(CheckGrowFitsTest, AGrowPastTheCapIsRefusedNamingTheLimit) {
  // The pool serves 1 QP on its rail; 64 more would make 65.
  const std::vector<size_t> served = {1};
  const absl::Status s =
      CheckGrowFits(ConnectCarrying({64}, true), served, kMostPerRail);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("at most 64 QPs per rail"),
                                 HasSubstr("rail 0 would make it 65")));
}

TEST(CheckGrowFitsTest, AGrowUpToTheCapFits) {
  const std::vector<size_t> served = {32};
  EXPECT_TRUE(
      CheckGrowFits(ConnectCarrying({32}, true), served, kMostPerRail).ok());
}

TEST(CheckGrowFitsTest, EveryRailIsHeldToTheCap) {
  // Rail 0's grow fits; rail 1's does not, so the whole grow is refused.
  const std::vector<size_t> served = {2, 63};
  const absl::Status s =
      CheckGrowFits(ConnectCarrying({2, 2}, true), served, kMostPerRail);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("rail 1 would make it 65"));
}

TEST(CheckGrowFitsTest, ARailThePoolDoesNotServeCannotGrow) {
  // Rail 1 was left out of the handshake (0), rail 2 is past the pool's.
  const std::vector<size_t> served = {4, 0};
  for (const std::vector<int>& counts :
       {std::vector<int>{0, 1}, std::vector<int>{0, 0, 1}}) {
    const absl::Status s =
        CheckGrowFits(ConnectCarrying(counts, true), served, kMostPerRail);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr("is not served; connect again"));
  }
}

TEST(CheckConnectRequestTest, AWellFormedConnectPasses) {
  EXPECT_TRUE(CheckConnectRequest(ConnectCarrying({4, 0, 4}), kMostPerRail)
                  .ok());
}

TEST(CheckConnectRequestTest, RefusesMoreRailsThanTheDaemonPairs) {
  std::vector<int> counts(kMaxRails + 1, 0);
  counts[0] = 1;
  const absl::Status s =
      CheckConnectRequest(ConnectCarrying(counts), kMostPerRail);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("at most 64 rails, got 65"));
}

TEST(CheckConnectRequestTest, RefusesMoreQpsOnARailThanTheLimit) {
  const absl::Status s =
      CheckConnectRequest(ConnectCarrying({1, 65}), kMostPerRail);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("at most 64 QP endpoints per rail, got 65 on rail 1"));
}

TEST(CheckConnectRequestTest, RefusesAConnectWithoutEndpoints) {
  const absl::Status s =
      CheckConnectRequest(ConnectCarrying({0, 0}), kMostPerRail);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("at least one rail"));
}

TEST(CheckConnectRequestTest, RefusesAConnectThatNamesNoCaller) {
  v1::ConnectRequest request = ConnectCarrying({1});
  request.clear_address();
  const absl::Status s = CheckConnectRequest(request, kMostPerRail);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("Peer address"));
}

}  // namespace
}  // namespace rdmad::verbs
