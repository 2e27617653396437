// The directory link's words (cluster_directory.h): GetStatus and rdmactl
// show them, and clients compare against them, so each state keeps its word.
#include "daemon/directory/cluster_directory.h"

#include "gtest/gtest.h"

namespace rdmad::directory {
namespace {

TEST(DirectoryLinkTest, EveryStateKeepsItsWord) {
  EXPECT_EQ(DirectoryLinkName(DirectoryLink::kConnecting), "connecting");
  EXPECT_EQ(DirectoryLinkName(DirectoryLink::kConnected), "connected");
  EXPECT_EQ(DirectoryLinkName(DirectoryLink::kDisconnected), "disconnected");
  EXPECT_EQ(DirectoryLinkName(DirectoryLink::kStopped), "stopped");
  EXPECT_EQ(DirectoryLinkName(static_cast<DirectoryLink>(9)), "unknown");
}

TEST(DirectoryLinkTest, ASnapshotStartsConnecting) {
  EXPECT_EQ(DirectoryState().state, DirectoryLink::kConnecting);
}

}  // namespace
}  // namespace rdmad::directory
