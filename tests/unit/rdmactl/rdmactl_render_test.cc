// How rdmactl shows answers (client/rdmactl/render.h, format.h,
// progress.h): tables with the columns of each transport, JSON with the
// tables' short names, one exit status per class of error, and progress
// lines.
#include "client/rdmactl/render.h"

#include <string>
#include <vector>

#include "client/rdmactl/format.h"
#include "client/rdmactl/progress.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::rdmactl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

QpInfo TcpConnection() {
  QpInfo q;
  q.peer = "10.0.0.2:7471";
  q.transport = Transport::kTcp;
  q.state = QpState::kReady;
  q.posted = 12;
  q.completed = 11;
  q.errors = 1;
  q.connection = 3;
  q.local_address = "10.0.0.1:40000";
  q.remote_address = "10.0.0.2:7472";
  return q;
}

QpInfo VerbsQp() {
  QpInfo q;
  q.peer = "10.0.0.2:7471";
  q.transport = Transport::kVerbs;
  q.state = QpState::kRts;
  q.device = "rxe0";
  q.local_qpn = 17;
  q.remote_qpn = 18;
  q.path_mtu = 1024;
  q.post_calls = 2;
  return q;
}

TEST(RenderQpsTest, TcpConnectionsShowWhatTcpHas) {
  const std::string text = RenderQps({TcpConnection()});
  EXPECT_THAT(text, HasSubstr("TCP data connections:"));
  EXPECT_THAT(text, HasSubstr("10.0.0.1:40000"));
  EXPECT_THAT(text, HasSubstr("10.0.0.2:7472"));
  EXPECT_THAT(text, Not(HasSubstr("QPN")));
  EXPECT_THAT(text, Not(HasSubstr("MTU")));
  const std::string json = QpsJson({TcpConnection()}).Dump();
  EXPECT_THAT(json, HasSubstr("\"transport\": \"tcp\""));
  EXPECT_THAT(json, HasSubstr("\"local\": \"10.0.0.1:40000\""));
  EXPECT_THAT(json, HasSubstr("\"sent\": 12"));
  EXPECT_THAT(json, Not(HasSubstr("qpn")));
}

TEST(RenderQpsTest, VerbsQpsKeepTheirColumnsInATableOfTheirOwn) {
  const std::string text = RenderQps({VerbsQp(), TcpConnection()});
  EXPECT_THAT(text, HasSubstr("verbs queue pairs:"));
  EXPECT_THAT(text, HasSubstr("LOCAL QPN"));
  EXPECT_THAT(text, HasSubstr("rxe0"));
  EXPECT_THAT(text, HasSubstr("TCP data connections:"));
  const std::string json = QpsJson({VerbsQp()}).Dump();
  EXPECT_THAT(json, HasSubstr("\"local_qpn\": 17"));
  EXPECT_THAT(json, HasSubstr("\"mtu\": 1024"));
}

TEST(RenderQueuesTest, AStoppedQueueSaysWhyInTextAndJson) {
  const absl::Time now = absl::FromUnixSeconds(1000000);
  QueueInfo q;
  q.id = 4;
  q.session_id = 9;
  q.pid = 1234;
  q.uid = 1000;
  q.submission_entries = 8;
  q.completion_entries = 16;
  q.notifications = true;
  q.engine = "rdmad-io0";
  q.opened = now - absl::Seconds(75);
  q.submitted = 10;
  q.completed = 10;
  q.failed = 2;
  q.notified = 8;
  q.notifications_held = 4093;
  q.notifications_lost = 17;
  q.client_wakeups = 3;
  q.stop_reason = absl::DataLossError("submission ring entry 3 overwritten");
  const std::string text = RenderQueues({q}, now);
  EXPECT_THAT(text, HasSubstr("WAKEUPS"));
  EXPECT_THAT(text, HasSubstr("HELD"));
  EXPECT_THAT(text, HasSubstr("4093"));
  EXPECT_THAT(text, HasSubstr("LOST"));
  EXPECT_THAT(text, HasSubstr("8/16 +n"));
  EXPECT_THAT(text, HasSubstr("1m 15s"));
  EXPECT_THAT(
      text,
      HasSubstr("stopped: DATA_LOSS: submission ring entry 3 overwritten"));
  const std::string json = QueuesJson({q}, now).Dump();
  EXPECT_THAT(json, HasSubstr("\"age_ms\": 75000"));
  EXPECT_THAT(json, HasSubstr("\"notifications\": true"));
  EXPECT_THAT(json, HasSubstr("\"held\": 4093"));
  EXPECT_THAT(json, HasSubstr("\"lost\": 17"));
  EXPECT_THAT(json, HasSubstr("\"wakeups\": 3"));
  EXPECT_THAT(json, HasSubstr("\"state\": \"stopped\""));
  EXPECT_THAT(json, HasSubstr("\"stop_code\": \"DATA_LOSS\""));
  EXPECT_EQ(RenderQueues({}, now), "no queues\n");
}

TEST(RenderPeersTest, LastErrorIsShown) {
  PeerInfo p;
  p.address = "10.0.0.2:7471";
  p.state = PeerState::kReady;
  p.transport = Transport::kTcp;
  p.ops_failed = 14;
  p.last_error = "NOT_FOUND: no exported region named 'kv'";
  EXPECT_THAT(RenderPeers({p}), HasSubstr("NOT_FOUND: no exported region"));
  const std::string json = PeersJson({p}).Dump();
  EXPECT_THAT(json, HasSubstr("\"failed\": 14"));
  EXPECT_THAT(json, HasSubstr("\"last_error\": \"NOT_FOUND"));
}

TEST(RenderPeersTest, RailsGetALineEach) {
  PeerInfo p;
  p.address = "10.0.0.2:7471";
  p.state = PeerState::kDegraded;
  p.transport = Transport::kVerbs;
  RailInfo up;
  up.device = "rxe0";
  up.port = 1;
  up.remote_device = "rxe0";
  up.state = RailState::kActive;
  up.bytes = 3 << 20;
  up.bandwidth_bytes_per_second = 8 << 20;
  RailInfo down = up;
  down.index = 1;
  down.device = "rxe1";
  down.state = RailState::kPaused;
  down.port_active = false;
  down.pauses = 2;
  down.paused_left = absl::Seconds(25);
  down.last_error = "port 1 of rxe1 went down";
  p.rails = {up, down};
  const std::string text = RenderPeers({p});
  EXPECT_THAT(text, HasSubstr("rails:"));
  EXPECT_THAT(text, ::testing::ContainsRegex("rxe1/1 +rxe0 +PAUSED +DOWN"));
  EXPECT_THAT(text, HasSubstr("8 MiB/s"));
  EXPECT_THAT(text, HasSubstr("25s"));
  EXPECT_THAT(text, HasSubstr("port 1 of rxe1 went down"));
  const std::string json = PeersJson({p}).Dump();
  EXPECT_THAT(json, HasSubstr("\"state\": \"PAUSED\""));
  EXPECT_THAT(json, HasSubstr("\"pauses\": 2"));
  EXPECT_THAT(json, HasSubstr("\"paused_ms\": 25000"));
  // No rails (TCP): no rails table.
  p.rails.clear();
  EXPECT_THAT(RenderPeers({p}), ::testing::Not(HasSubstr("rails:")));
}

TEST(RenderRegionsTest, JsonUsesTheTablesNamesAndNumbers) {
  RegionInfo r;
  r.id = 3;
  r.name = "kv";
  r.size = 1 << 20;
  r.owner = RegionOwner::kDaemon;
  r.mode = 0640;
  r.export_access = Access::kReadWrite;
  r.owner_uid = 1000;
  r.owner_gid = 100;
  const std::string json = RegionJson(r).Dump();
  EXPECT_THAT(json, HasSubstr("\"size\": 1048576"));
  EXPECT_THAT(json, HasSubstr("\"mode\": \"0640\""));  // not 416
  EXPECT_THAT(json, HasSubstr("\"export\": \"rw\""));
  EXPECT_THAT(json, HasSubstr("\"owner\": \"daemon\""));
  EXPECT_THAT(json, HasSubstr("\"session\": null"));
  const std::string table = RenderRegions({r});
  EXPECT_THAT(table, HasSubstr("0640"));
  EXPECT_THAT(table, HasSubstr("1 MiB"));
}

TEST(RenderStatusTest, SaysWhichDevicesRegisterDmabufs) {
  DaemonStatus s;
  EXPECT_THAT(RenderStatus(s),
              HasSubstr("dma-buf:           over TCP, where rdmad can map it "
                        "for the CPU"));
  s.device_count = 2;
  EXPECT_THAT(RenderStatus(s),
              HasSubstr("dma-buf:           no device supports it"));
  s.dmabuf_devices = {"mlx5_0", "mlx5_1"};
  EXPECT_THAT(RenderStatus(s), HasSubstr("dma-buf:           mlx5_0, mlx5_1"));
  EXPECT_THAT(StatusJson(s).Dump(),
              HasSubstr("\"dmabuf_devices\": [\n    \"mlx5_0\",\n    "
                        "\"mlx5_1\"\n  ]"));
}

TEST(RenderDevicesTest, ShowsTheDriverAndTheDmabufProbe) {
  DeviceInfo rxe;
  rxe.name = "rxe0";
  rxe.driver = "rxe";
  rxe.dmabuf_probe = "ibv_reg_dmabuf_mr: Operation not supported (EOPNOTSUPP)";
  DeviceInfo mlx5;
  mlx5.name = "mlx5_0";
  mlx5.driver = "mlx5_core";
  mlx5.dmabuf = true;
  const std::string text = RenderDevices({{rxe, mlx5}, ""});
  EXPECT_THAT(text, HasSubstr("rxe0: GUID -, -, driver rxe\n  dma-buf: no "
                              "(ibv_reg_dmabuf_mr: Operation not supported "
                              "(EOPNOTSUPP))"));
  EXPECT_THAT(text, HasSubstr("driver mlx5_core\n  dma-buf: yes\n"));
  const std::string json = DevicesJson({{rxe, mlx5}, ""}).Dump();
  EXPECT_THAT(json, HasSubstr("\"driver\": \"rxe\""));
  EXPECT_THAT(json, HasSubstr("\"dmabuf\": false"));
  EXPECT_THAT(json, HasSubstr("\"dmabuf\": true"));
}

TEST(RenderDevicesTest, ShowsTheNoticeReceiveQueueWhereThereIsOne) {
  DeviceInfo with;
  with.name = "rxe0";
  with.notice_receives =
      DeviceInfo::NoticeReceives{.depth = 1024, .posted = 1021, .reposts = 9};
  DeviceInfo without;
  without.name = "rxe1";
  const std::string text = RenderDevices({{with, without}, ""});
  EXPECT_THAT(text, HasSubstr("  notice receives (SRQ): 1021 of 1024 posted, "
                              "9 reposted\n"));
  EXPECT_EQ(text.find("notice receives"), text.rfind("notice receives"))
      << "only the device that has one shows it";
  const std::string json = DevicesJson({{with, without}, ""}).Dump();
  EXPECT_THAT(json, HasSubstr("\"depth\": 1024"));
  EXPECT_THAT(json, HasSubstr("\"posted\": 1021"));
  EXPECT_THAT(json, HasSubstr("\"reposts\": 9"));
  EXPECT_THAT(json, HasSubstr("\"notice_receives\": null"));
}

TEST(RenderStatusTest, ShowsThePinnedCapAndWhereItComesFrom) {
  DaemonStatus s;
  s.transport = Transport::kTcp;
  s.memlock_limit = 8 << 20;
  s.max_pinned_bytes_source = "no RDMA device, so nothing is pinned";
  s.pinned_bytes = 80 << 20;
  const std::string text = RenderStatus(s);
  EXPECT_THAT(text, HasSubstr("memlock limit:     8 MiB"));
  EXPECT_THAT(text,
              HasSubstr("max pinned bytes:  none (no RDMA device, so nothing "
                        "is pinned)"));
  EXPECT_THAT(text, HasSubstr("pinned bytes:      80 MiB"));
  s.max_pinned_bytes = 16 << 20;
  s.max_pinned_bytes_source = "config max_pinned_bytes";
  EXPECT_THAT(RenderStatus(s),
              HasSubstr("16 MiB (config max_pinned_bytes)"));
  const std::string json = StatusJson(s).Dump();
  EXPECT_THAT(json, HasSubstr("\"max_pinned_bytes\": 16777216"));
  EXPECT_THAT(json, HasSubstr("\"memlock_limit\": 8388608"));
}

TEST(RenderQpsTest, RoleAndTransportColumns) {
  QpInfo initiator = VerbsQp();
  initiator.role = "initiator";
  QpInfo responder = VerbsQp();
  responder.role = "responder";
  QpInfo tcp = TcpConnection();
  tcp.role = "initiator";
  tcp.post_calls = 5;
  const std::string text = RenderQps({initiator, responder, tcp});
  EXPECT_THAT(text, HasSubstr("ROLE"));
  EXPECT_THAT(text, HasSubstr("TRANSPORT"));
  EXPECT_THAT(text, HasSubstr("responder  verbs"));
  EXPECT_THAT(text, HasSubstr("initiator  tcp"));
  EXPECT_THAT(text, HasSubstr("SENDMSG CALLS"));
  const std::string json = QpsJson({responder, tcp}).Dump();
  EXPECT_THAT(json, HasSubstr("\"role\": \"responder\""));
  EXPECT_THAT(json, HasSubstr("\"sendmsg_calls\": 5"));
}

DirectoryStatus ConnectedDirectory() {
  DirectoryStatus d;
  d.url = "etcd://10.0.0.9:2379";
  d.endpoint = "10.0.0.9:2379";
  d.prefix = "/rdmad";
  d.state = DirectoryState::kConnected;
  d.lease_id = 0x1234;
  d.lease_ttl = absl::Seconds(10);
  d.published_regions = 2;
  d.cached_regions = 5;
  d.watch_live = true;
  d.conflicts = {"kv (held by 10.0.0.3:7471)"};
  return d;
}

TEST(RenderDirectoryTest, StatusShowsTheDirectoryOrNone) {
  DaemonStatus s;
  EXPECT_THAT(RenderStatus(s), HasSubstr("directory:         none"));
  EXPECT_THAT(StatusJson(s).Dump(), HasSubstr("\"directory\": null"));
  s.directory = ConnectedDirectory();
  const std::string text = RenderStatus(s);
  EXPECT_THAT(text, HasSubstr("etcd://10.0.0.9:2379 (prefix /rdmad): "
                              "connected via 10.0.0.9:2379, lease 0x1234"));
  EXPECT_THAT(text, HasSubstr("NOT LISTED, name taken: kv (held by"));
  const std::string json = StatusJson(s).Dump();
  EXPECT_THAT(json, HasSubstr("\"state\": \"connected\""));
  EXPECT_THAT(json, HasSubstr("\"published\": 2"));
  EXPECT_THAT(json, HasSubstr("\"lease\": \"0x1234\""));
}

TEST(RenderDirectoryTest, ClusterRegionsAndLookup) {
  ClusterRegion r;
  r.name = "kv/shard-7";
  r.node = "10.0.0.2:7471";
  r.size = 4096;
  r.access = Access::kReadWrite;
  r.region_id = 9;
  r.incarnation = 0xabc;
  r.revision = 42;
  const absl::Time now = absl::FromUnixSeconds(1700000000);
  r.exported = now - absl::Minutes(5);
  ClusterRegionList list;
  list.regions = {r};
  list.truncated = true;
  const std::string text = RenderClusterRegions(list, now);
  EXPECT_THAT(text, HasSubstr("kv/shard-7"));
  EXPECT_THAT(text, HasSubstr("4 KiB"));
  EXPECT_THAT(text, HasSubstr("5m"));
  EXPECT_THAT(text, HasSubstr("0x0000000000000abc/42"));
  EXPECT_THAT(text, HasSubstr("give a longer PREFIX"));
  const std::string json = ClusterRegionsJson(list, now).Dump();
  EXPECT_THAT(json, HasSubstr("\"size\": 4096"));  // a number
  EXPECT_THAT(json, HasSubstr("\"access\": \"rw\""));
  EXPECT_THAT(json, HasSubstr("\"age_ms\": 300000"));
  EXPECT_THAT(json, HasSubstr("\"truncated\": true"));
  ClusterLookup lookup{r, true, absl::Microseconds(12)};
  EXPECT_THAT(RenderLookup(lookup), HasSubstr("from:        cache"));
  EXPECT_THAT(LookupJson(lookup).Dump(), HasSubstr("\"latency_us\": 12"));
}

TEST(ExitStatusTest, OnePerClassOfError) {
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kOk), 0);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kUnknown), 1);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kInternal), 1);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kUnavailable), 3);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kNotFound), 4);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kPermissionDenied), 5);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kUnauthenticated), 5);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kAlreadyExists), 6);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kInvalidArgument), 7);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kOutOfRange), 7);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kResourceExhausted), 8);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kDeadlineExceeded), 9);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kFailedPrecondition), 10);
  EXPECT_EQ(ExitStatusFor(absl::StatusCode::kAborted), 10);
  // Never 2: that is the command line's.
  for (int code = 0; code <= 16; ++code) {
    EXPECT_NE(ExitStatusFor(static_cast<absl::StatusCode>(code)), 2) << code;
  }
}

TEST(ProgressTest, TextSaysHowFarAndHowFast) {
  EXPECT_EQ(TransferProgressText("put kv", 64 << 20, uint64_t{128} << 20,
                                 absl::Seconds(2)),
            "put kv: 64 MiB of 128 MiB (50%), 33.6 MB/s");
  EXPECT_EQ(TransferProgressText("get kv", 1 << 20, std::nullopt,
                                 absl::ZeroDuration()),
            "get kv: 1 MiB");
}

TEST(ProgressTest, DrawsOnlyWhenEnabled) {
  ::testing::internal::CaptureStderr();
  {
    ProgressLine line(false);  // stderr is not a terminal
    line.Show("put kv: 1 MiB");
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ::testing::internal::CaptureStderr();
  {
    ProgressLine line(true);
    line.Show("put kv: 1 MiB");
  }  // erased when done, so the answer starts on a clean line
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "\r\033[Kput kv: 1 MiB\r\033[K");
}

}  // namespace
}  // namespace rdmad::rdmactl
