// Connection negotiation of RC QPs (ResolvePath): pure, no device needed.
#include <infiniband/verbs.h>

#include "daemon/transport/verbs/conversions.h"
#include "daemon/transport/verbs/queue_pair.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::verbs {
namespace {

using ::testing::HasSubstr;

LocalLimits RoceLimits() {
  LocalLimits local;
  local.active_mtu = 1024;
  local.ethernet = true;
  local.max_qp_rd_atom = 128;
  local.max_qp_init_rd_atom = 128;
  return local;
}

QpEndpoint RoceRemote() {
  QpEndpoint remote;
  remote.qpn = 0x11;
  remote.psn = 0xabcdef;
  remote.gid = GidFromText("::ffff:192.0.2.2").value();
  remote.gid_index = 1;
  remote.mtu = 4096;
  remote.max_rd_atomic = 16;
  return remote;
}

TEST(QpConfigTest, DefaultsAreTheDocumentedOnes) {
  const QpConfig config;
  EXPECT_EQ(config.timeout, 18);
  EXPECT_EQ(config.retry_cnt, 6);  // rxe takes 7 as "forever"
  // Bounded: a notice SEND to a peer without receives fails, never hangs.
  EXPECT_EQ(config.rnr_retry, 3);
  // ... after waiting long enough for a busy receiver's loops to catch up.
  EXPECT_EQ(config.min_rnr_timer, 20);
  EXPECT_GE(config.max_recv_wr, 16u);  // kNoticeCredits receives per QP
  EXPECT_GT(config.hop_limit, 1);
  EXPECT_EQ(config.path_mtu, 0u);
}

TEST(ResolvePathTest, PathMtuIsTheSmallerSide) {
  absl::StatusOr<PathParams> path =
      ResolvePath(QpConfig{}, RoceLimits(), RoceRemote());
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(path->path_mtu, IBV_MTU_1024);

  LocalLimits big = RoceLimits();
  big.active_mtu = 4096;
  QpEndpoint small = RoceRemote();
  small.mtu = 512;
  path = ResolvePath(QpConfig{}, big, small);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(path->path_mtu, IBV_MTU_512);
}

TEST(ResolvePathTest, ConfiguredMtuCaps) {
  QpConfig config;
  config.path_mtu = 256;
  absl::StatusOr<PathParams> path =
      ResolvePath(config, RoceLimits(), RoceRemote());
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(path->path_mtu, IBV_MTU_256);

  config.path_mtu = 1500;
  EXPECT_EQ(ResolvePath(config, RoceLimits(), RoceRemote()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ResolvePathTest, ReadDepthIsMinOfBothSidesAndConfig) {
  QpConfig config;
  config.max_rd_atomic = 16;
  config.max_dest_rd_atomic = 16;
  LocalLimits local = RoceLimits();
  local.max_qp_init_rd_atom = 8;
  local.max_qp_rd_atom = 4;
  QpEndpoint remote = RoceRemote();
  remote.max_rd_atomic = 2;
  absl::StatusOr<PathParams> path = ResolvePath(config, local, remote);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(path->max_rd_atomic, 2);       // the peer accepts only 2
  EXPECT_EQ(path->max_dest_rd_atomic, 4);  // our device tracks only 4

  remote.max_rd_atomic = 100;
  path = ResolvePath(config, local, remote);
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(path->max_rd_atomic, 8);  // our device initiates at most 8
}

TEST(ResolvePathTest, RemoteReadDepthZeroMeansOne) {
  QpEndpoint remote = RoceRemote();
  remote.max_rd_atomic = 0;
  absl::StatusOr<PathParams> path =
      ResolvePath(QpConfig{}, RoceLimits(), remote);
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(path->max_rd_atomic, 1);
}

TEST(ResolvePathTest, ResponderResourcesClampToByte) {
  QpConfig config;
  config.max_dest_rd_atomic = 1000;
  LocalLimits local = RoceLimits();
  local.max_qp_rd_atom = 1000;
  EXPECT_EQ(ResponderResources(config, local), 255);
  local.max_qp_rd_atom = 0;
  EXPECT_EQ(ResponderResources(config, local), 1);
}

TEST(ResolvePathTest, RoceUsesGrh) {
  absl::StatusOr<PathParams> path =
      ResolvePath(QpConfig{}, RoceLimits(), RoceRemote());
  ASSERT_TRUE(path.ok());
  EXPECT_TRUE(path->use_grh);
}

TEST(ResolvePathTest, RoceNeedsRemoteGid) {
  QpEndpoint remote = RoceRemote();
  remote.gid = Gid{};
  absl::Status status = ResolvePath(QpConfig{}, RoceLimits(), remote).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("GID"));
}

TEST(ResolvePathTest, InfiniBandUsesLid) {
  LocalLimits local = RoceLimits();
  local.ethernet = false;
  QpEndpoint remote = RoceRemote();
  remote.lid = 3;
  absl::StatusOr<PathParams> path = ResolvePath(QpConfig{}, local, remote);
  ASSERT_TRUE(path.ok());
  EXPECT_FALSE(path->use_grh);

  remote.lid = 0;
  absl::Status status = ResolvePath(QpConfig{}, local, remote).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("LID"));

  local.grh_required = true;
  path = ResolvePath(QpConfig{}, local, remote);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_TRUE(path->use_grh);
}

TEST(ResolvePathTest, RejectsBadRemoteFields) {
  QpEndpoint remote = RoceRemote();
  remote.qpn = 0;
  EXPECT_THAT(ResolvePath(QpConfig{}, RoceLimits(), remote).status().message(),
              HasSubstr("QPN"));
  remote = RoceRemote();
  remote.qpn = 1u << 24;
  EXPECT_EQ(ResolvePath(QpConfig{}, RoceLimits(), remote).status().code(),
            absl::StatusCode::kInvalidArgument);
  remote = RoceRemote();
  remote.psn = 1u << 24;
  EXPECT_THAT(ResolvePath(QpConfig{}, RoceLimits(), remote).status().message(),
              HasSubstr("PSN"));
  remote = RoceRemote();
  remote.mtu = 1500;
  EXPECT_THAT(ResolvePath(QpConfig{}, RoceLimits(), remote).status().message(),
              HasSubstr("MTU"));
}

TEST(ResolvePathTest, LocalPortWithoutMtuIsAPrecondition) {
  LocalLimits local = RoceLimits();
  local.active_mtu = 0;
  EXPECT_EQ(ResolvePath(QpConfig{}, local, RoceRemote()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace rdmad::verbs
