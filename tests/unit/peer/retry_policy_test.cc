// Which failures the peer layer retries (retry_policy.h), and how a failed
// Peer-service call becomes a status (grpc_peer_connector.h): connection
// problems are UNAVAILABLE and retried; the peer's answers keep their codes
// and are not.
#include "daemon/peer/retry_policy.h"

#include "daemon/peer/grpc_peer_connector.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace rdmad::peer {
namespace {

using ::testing::HasSubstr;

TEST(RetryPolicyTest, EveryCode) {
  struct Case {
    absl::StatusCode code;
    Retry fresh;   // target not from the cache
    Retry cached;  // target from the name cache
  };
  const Case cases[] = {
      {absl::StatusCode::kUnavailable, Retry::kReconnect, Retry::kReconnect},
      {absl::StatusCode::kNotFound, Retry::kNo, Retry::kReresolve},
      {absl::StatusCode::kPermissionDenied, Retry::kNo, Retry::kReresolve},
      {absl::StatusCode::kInternal, Retry::kNo, Retry::kNo},
      {absl::StatusCode::kUnknown, Retry::kNo, Retry::kNo},
      {absl::StatusCode::kUnimplemented, Retry::kNo, Retry::kNo},
      {absl::StatusCode::kDeadlineExceeded, Retry::kNo, Retry::kNo},
      {absl::StatusCode::kOutOfRange, Retry::kNo, Retry::kNo},
      {absl::StatusCode::kInvalidArgument, Retry::kNo, Retry::kNo},
      {absl::StatusCode::kResourceExhausted, Retry::kNo, Retry::kNo},
      {absl::StatusCode::kFailedPrecondition, Retry::kNo, Retry::kNo},
      {absl::StatusCode::kCancelled, Retry::kNo, Retry::kNo},
      {absl::StatusCode::kDataLoss, Retry::kNo, Retry::kNo},
  };
  for (const Case& c : cases) {
    const absl::Status s(c.code, "x");
    EXPECT_EQ(RetryFor(s, false), c.fresh) << s;
    EXPECT_EQ(RetryFor(s, true), c.cached) << s;
  }
}

TEST(FromPeerCallTest, UnreachableIsUnavailableAnswersKeepTheirCodes) {
  const std::string peer = "10.0.0.2:7471";
  for (grpc::StatusCode code :
       {grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::DEADLINE_EXCEEDED,
        grpc::StatusCode::CANCELLED}) {
    absl::Status s = FromPeerCall(grpc::Status(code, "boom"), peer, "Hello");
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr(peer));
    EXPECT_THAT(s.message(), HasSubstr("boom"));
  }
  for (grpc::StatusCode code :
       {grpc::StatusCode::INTERNAL, grpc::StatusCode::UNKNOWN,
        grpc::StatusCode::UNIMPLEMENTED, grpc::StatusCode::NOT_FOUND,
        grpc::StatusCode::PERMISSION_DENIED,
        grpc::StatusCode::FAILED_PRECONDITION}) {
    absl::Status s = FromPeerCall(grpc::Status(code, "boom"), peer, "Resolve");
    EXPECT_EQ(static_cast<int>(s.code()), static_cast<int>(code)) << s;
    EXPECT_THAT(s.message(), HasSubstr("answered Resolve"));
  }
  EXPECT_TRUE(FromPeerCall(grpc::Status::OK, peer, "Hello").ok());
}

}  // namespace
}  // namespace rdmad::peer
