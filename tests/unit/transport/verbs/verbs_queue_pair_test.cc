// Connection negotiation of RC QPs (ResolvePath) and the WR chains they
// post (BuildSendChain): pure, no device needed.
#include <infiniband/verbs.h>

#include <cstdint>
#include <vector>

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

TEST(BuildSendChainTest, LinksOneWrPerOpWithItsOwnGatherEntry) {
  char buffer[64];
  std::vector<RdmaOp> ops = {
      {.opcode = RdmaOp::Opcode::kWrite,
       .wr_id = 7,
       .local_addr = buffer,
       .length = 8,
       .lkey = 0x11,
       .remote_addr = 0x1000,
       .rkey = 0x22,
       .signaled = false,
       .inline_data = true},
      {.opcode = RdmaOp::Opcode::kRead,
       .wr_id = 8,
       .local_addr = buffer + 8,
       .length = 32,
       .lkey = 0x33,
       .remote_addr = 0x2000,
       .rkey = 0x44},
      {.opcode = RdmaOp::Opcode::kSend,
       .wr_id = 9,
       .local_addr = buffer + 40,
       .length = 16,
       .lkey = 0x55,
       .signaled = false},
  };
  // Storage left over from an earlier, longer chain: every field is set.
  std::vector<ibv_send_wr> wrs(4);
  std::vector<ibv_sge> sges(4);
  for (ibv_send_wr& wr : wrs) {
    wr.next = &wrs[0];
    wr.send_flags = IBV_SEND_FENCE;
    wr.imm_data = 1;
  }
  BuildSendChain(ops, absl::MakeSpan(wrs), absl::MakeSpan(sges));

  EXPECT_EQ(wrs[0].next, &wrs[1]);
  EXPECT_EQ(wrs[1].next, &wrs[2]);
  EXPECT_EQ(wrs[2].next, nullptr);
  for (size_t i = 0; i < ops.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(wrs[i].wr_id, ops[i].wr_id);
    EXPECT_EQ(wrs[i].imm_data, 0u);
    ASSERT_EQ(wrs[i].num_sge, 1);
    ASSERT_EQ(wrs[i].sg_list, &sges[i]);
    EXPECT_EQ(sges[i].addr, reinterpret_cast<uintptr_t>(ops[i].local_addr));
    EXPECT_EQ(sges[i].length, ops[i].length);
    EXPECT_EQ(sges[i].lkey, ops[i].lkey);
  }
  EXPECT_EQ(wrs[0].opcode, IBV_WR_RDMA_WRITE);
  EXPECT_EQ(wrs[0].send_flags, unsigned{IBV_SEND_INLINE});
  EXPECT_EQ(wrs[0].wr.rdma.remote_addr, 0x1000u);
  EXPECT_EQ(wrs[0].wr.rdma.rkey, 0x22u);
  EXPECT_EQ(wrs[1].opcode, IBV_WR_RDMA_READ);
  EXPECT_EQ(wrs[1].send_flags, unsigned{IBV_SEND_SIGNALED});
  EXPECT_EQ(wrs[1].wr.rdma.remote_addr, 0x2000u);
  EXPECT_EQ(wrs[1].wr.rdma.rkey, 0x44u);
  EXPECT_EQ(wrs[2].opcode, IBV_WR_SEND);
  EXPECT_EQ(wrs[2].send_flags, 0u);
}

TEST(BuildSendChainTest, ZeroLengthOpHasNoGatherEntry) {
  const RdmaOp op{.wr_id = 3, .length = 0, .remote_addr = 0x10, .rkey = 1};
  ibv_send_wr wr;
  ibv_sge sge;
  BuildSendChain(absl::MakeConstSpan(&op, 1), absl::MakeSpan(&wr, 1),
                 absl::MakeSpan(&sge, 1));
  EXPECT_EQ(wr.num_sge, 0);
  EXPECT_EQ(wr.sg_list, nullptr);
  EXPECT_EQ(wr.next, nullptr);
  EXPECT_EQ(wr.wr_id, 3u);
}

}  // namespace
}  // namespace rdmad::verbs
