// Pure conversions of the verbs layer: no RDMA device needed.
#include <infiniband/verbs.h>

#include "daemon/transport/verbs/conversions.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::verbs {
namespace {

using ::testing::HasSubstr;

TEST(MtuTest, EnumToBytes) {
  EXPECT_EQ(MtuToBytes(IBV_MTU_256), 256u);
  EXPECT_EQ(MtuToBytes(IBV_MTU_512), 512u);
  EXPECT_EQ(MtuToBytes(IBV_MTU_1024), 1024u);
  EXPECT_EQ(MtuToBytes(IBV_MTU_2048), 2048u);
  EXPECT_EQ(MtuToBytes(IBV_MTU_4096), 4096u);
  EXPECT_EQ(MtuToBytes(0), 0u);
  EXPECT_EQ(MtuToBytes(9), 0u);
}

TEST(MtuTest, BytesToEnumRoundTrips) {
  for (ibv_mtu mtu :
       {IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024, IBV_MTU_2048, IBV_MTU_4096}) {
    absl::StatusOr<ibv_mtu> back = MtuFromBytes(MtuToBytes(mtu));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, mtu);
  }
}

TEST(MtuTest, RejectsNonMtuSizes) {
  for (uint32_t bytes : {0u, 1u, 255u, 1500u, 9000u, 8192u}) {
    absl::StatusOr<ibv_mtu> mtu = MtuFromBytes(bytes);
    EXPECT_EQ(mtu.status().code(), absl::StatusCode::kInvalidArgument) << bytes;
    EXPECT_THAT(mtu.status().message(), HasSubstr("256, 512, 1024"));
  }
}

TEST(GidTest, TextOfIpv4MappedGid) {
  Gid gid{};
  gid[10] = 0xff;
  gid[11] = 0xff;
  gid[12] = 192;
  gid[13] = 0;
  gid[14] = 2;
  gid[15] = 1;
  EXPECT_EQ(GidToText(gid), "::ffff:192.0.2.1");
  EXPECT_TRUE(IsIpv4MappedGid(gid));
  EXPECT_FALSE(IsZeroGid(gid));
}

TEST(GidTest, TextOfLinkLocalGid) {
  Gid gid{};
  gid[0] = 0xfe;
  gid[1] = 0x80;
  gid[15] = 1;
  EXPECT_EQ(GidToText(gid), "fe80::1");
  EXPECT_FALSE(IsIpv4MappedGid(gid));
}

TEST(GidTest, ZeroGid) {
  Gid gid{};
  EXPECT_TRUE(IsZeroGid(gid));
  EXPECT_EQ(GidToText(gid), "::");
  EXPECT_FALSE(IsIpv4MappedGid(gid));
}

TEST(GidTest, ParseRoundTrips) {
  for (const char* text : {"::ffff:192.0.2.1", "fe80::1",
                           "fe80::5054:ff:fe12:3456", "::", "2001:db8::42"}) {
    absl::StatusOr<Gid> gid = GidFromText(text);
    ASSERT_TRUE(gid.ok()) << text << ": " << gid.status();
    EXPECT_EQ(GidToText(*gid), text);
  }
}

TEST(GidTest, ParseRejectsGarbage) {
  for (const char* text : {"", "192.0.2.1", "fe80::1::2", "hello"}) {
    absl::StatusOr<Gid> gid = GidFromText(text);
    EXPECT_EQ(gid.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(GidTest, IbvUnionRoundTrip) {
  absl::StatusOr<Gid> gid = GidFromText("fe80::1234:5678");
  ASSERT_TRUE(gid.ok());
  const ibv_gid raw = GidToIbv(*gid);
  EXPECT_EQ(raw.raw[0], 0xfe);
  EXPECT_EQ(raw.raw[1], 0x80);
  EXPECT_EQ(raw.raw[15], 0x78);
  EXPECT_EQ(GidFromIbv(raw), *gid);
}

TEST(GidTest, TypeNames) {
  EXPECT_EQ(GidTypeName(IBV_GID_TYPE_ROCE_V2), "RoCEv2");
  EXPECT_EQ(GidTypeName(IBV_GID_TYPE_ROCE_V1), "IB/RoCEv1");
  EXPECT_EQ(GidTypeName(IBV_GID_TYPE_IB), "IB/RoCEv1");
}

TEST(GuidTest, NetworkOrderText) {
  const uint8_t bytes[8] = {0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56};
  uint64_t guid;
  std::memcpy(&guid, bytes, sizeof(guid));
  EXPECT_EQ(GuidToText(guid), "5054:00ff:fe12:3456");
}

TEST(NamesTest, PortStates) {
  struct Case {
    int ibv;
    core::PortState state;
    absl::string_view name;
  };
  const Case cases[] = {
      {IBV_PORT_NOP, core::PortState::kNop, "NOP"},
      {IBV_PORT_DOWN, core::PortState::kDown, "DOWN"},
      {IBV_PORT_INIT, core::PortState::kInit, "INIT"},
      {IBV_PORT_ARMED, core::PortState::kArmed, "ARMED"},
      {IBV_PORT_ACTIVE, core::PortState::kActive, "ACTIVE"},
      {IBV_PORT_ACTIVE_DEFER, core::PortState::kActiveDefer, "ACTIVE_DEFER"},
      {42, core::PortState::kUnknown, "UNKNOWN"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.ibv);
    EXPECT_EQ(PortStateFromIbv(c.ibv), c.state);
    EXPECT_EQ(core::PortStateName(PortStateFromIbv(c.ibv)), c.name);
  }
}

TEST(NamesTest, LinkLayersAndTransports) {
  EXPECT_EQ(LinkLayerName(IBV_LINK_LAYER_ETHERNET), "Ethernet");
  EXPECT_EQ(LinkLayerName(IBV_LINK_LAYER_INFINIBAND), "InfiniBand");
  EXPECT_EQ(LinkLayerName(IBV_LINK_LAYER_UNSPECIFIED), "Unspecified");
  EXPECT_EQ(TransportName(IBV_TRANSPORT_IB), "InfiniBand");
  EXPECT_EQ(TransportName(IBV_TRANSPORT_IWARP), "iWARP");
}

TEST(NamesTest, QpStates) {
  EXPECT_EQ(QpStateName(IBV_QPS_RESET), "RESET");
  EXPECT_EQ(QpStateName(IBV_QPS_INIT), "INIT");
  EXPECT_EQ(QpStateName(IBV_QPS_RTR), "RTR");
  EXPECT_EQ(QpStateName(IBV_QPS_RTS), "RTS");
  EXPECT_EQ(QpStateName(IBV_QPS_ERR), "ERR");
}

TEST(AccessFlagsTest, LocalWriteAlwaysRemoteAsRequested) {
  EXPECT_EQ(MrAccessFlags(core::RemoteAccess::kNone), IBV_ACCESS_LOCAL_WRITE);
  EXPECT_EQ(MrAccessFlags(core::RemoteAccess::kRead),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(MrAccessFlags(core::RemoteAccess::kWrite),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(MrAccessFlags(core::RemoteAccess::kReadWrite),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                IBV_ACCESS_REMOTE_WRITE);
}

TEST(AccessFlagsTest, NeverRemoteAtomic) {
  for (auto access :
       {core::RemoteAccess::kNone, core::RemoteAccess::kRead,
        core::RemoteAccess::kWrite, core::RemoteAccess::kReadWrite}) {
    EXPECT_EQ(MrAccessFlags(access) & IBV_ACCESS_REMOTE_ATOMIC, 0);
  }
}

ibv_wc FailedWc(ibv_wc_status status) {
  ibv_wc wc{};
  wc.status = status;
  wc.wr_id = 77;
  wc.qp_num = 0x11;
  wc.vendor_err = 0x81;
  return wc;
}

TEST(CompletionStatusTest, SuccessIsOk) {
  ibv_wc wc{};
  wc.status = IBV_WC_SUCCESS;
  EXPECT_TRUE(CompletionStatus(wc).ok());
}

TEST(CompletionStatusTest, RemoteAccessErrorNamesTheStatusString) {
  const absl::Status status = CompletionStatus(FailedWc(IBV_WC_REM_ACCESS_ERR));
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(),
              HasSubstr(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)));
  EXPECT_THAT(status.message(), HasSubstr("rkey"));
  EXPECT_THAT(status.message(), HasSubstr("wr_id 77"));
  EXPECT_THAT(status.message(), HasSubstr("0x000011"));
  EXPECT_THAT(status.message(), HasSubstr("vendor_err 0x81"));
  EXPECT_THAT(status.message(), HasSubstr("error state"));
}

TEST(CompletionStatusTest, CodesByKind) {
  EXPECT_EQ(WcStatusCode(IBV_WC_SUCCESS), absl::StatusCode::kOk);
  EXPECT_EQ(WcStatusCode(IBV_WC_LOC_PROT_ERR),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(WcStatusCode(IBV_WC_LOC_LEN_ERR),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WcStatusCode(IBV_WC_REM_INV_REQ_ERR),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WcStatusCode(IBV_WC_RETRY_EXC_ERR), absl::StatusCode::kUnavailable);
  // What soft-RoCE gives a WR whose network device went down.
  EXPECT_EQ(WcStatusCode(IBV_WC_LOC_QP_OP_ERR), absl::StatusCode::kUnavailable);
  EXPECT_EQ(WcStatusCode(IBV_WC_RNR_RETRY_EXC_ERR),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(WcStatusCode(IBV_WC_WR_FLUSH_ERR), absl::StatusCode::kAborted);
  EXPECT_EQ(WcStatusCode(IBV_WC_FATAL_ERR), absl::StatusCode::kInternal);
  EXPECT_EQ(WcStatusCode(IBV_WC_GENERAL_ERR), absl::StatusCode::kInternal);
}

TEST(CompletionStatusTest, EveryFailureMentionsItsStatusString) {
  for (int s = IBV_WC_LOC_LEN_ERR; s <= IBV_WC_TM_RNDV_INCOMPLETE; ++s) {
    const auto status = static_cast<ibv_wc_status>(s);
    const absl::Status result = CompletionStatus(FailedWc(status));
    EXPECT_FALSE(result.ok()) << s;
    EXPECT_THAT(result.message(), HasSubstr(ibv_wc_status_str(status))) << s;
  }
}

}  // namespace
}  // namespace rdmad::verbs
