// What the daemon passes on from another daemon when a client inspects it
// (daemon/service/peer_inspector.h): statuses with what to do, and only
// text that is safe on a terminal.
#include "daemon/service/peer_inspector.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::service {
namespace {

using ::testing::HasSubstr;

TEST(PeerInspectorTest, PeerTextIsMadePrintableAndBounded) {
  EXPECT_EQ(PrintableFromPeer("no region 'kv'"), "no region 'kv'");
  EXPECT_EQ(PrintableFromPeer("a\033]0;pwned\007b\n"), "a?]0;pwned?b?");
  EXPECT_EQ(PrintableFromPeer(std::string("x\0y", 3)), "x?y");
  const std::string long_text(5000, 'a');
  const std::string shown = PrintableFromPeer(long_text);
  EXPECT_EQ(shown.size(), 1024u + 3);
  EXPECT_THAT(shown, HasSubstr("..."));
}

TEST(PeerInspectorTest, StatusesNameThePeerAndSayWhatToDo) {
  const std::string peer = "10.0.0.2:7471";
  absl::Status down = PeerCallStatus(
      peer, grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"));
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(down.message(), HasSubstr("cannot reach the daemon at " + peer));
  EXPECT_THAT(down.message(), HasSubstr("peer address"));
  absl::Status old = PeerCallStatus(
      peer, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no method"));
  EXPECT_EQ(old.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(old.message(), HasSubstr("older rdmad"));
  absl::Status said = PeerCallStatus(
      peer, grpc::Status(grpc::StatusCode::NOT_FOUND, "no \033[2Jregion"));
  EXPECT_EQ(said.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(said.message(), HasSubstr("the daemon at " + peer + " says: "));
  EXPECT_THAT(said.message(), HasSubstr("no ?[2Jregion"));
  EXPECT_TRUE(PeerCallStatus(peer, grpc::Status::OK).ok());
}

}  // namespace
}  // namespace rdmad::service
