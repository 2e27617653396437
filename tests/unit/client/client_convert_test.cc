// The client library's own types (include/rdmad/info.h) from the daemon's
// messages (client/convert.h), and region addresses (RemoteRegion::Parse).
#include <initializer_list>
#include <utility>

#include "client/convert.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"

namespace rdmad::client_internal {
namespace {

TEST(ClientConvertTest, StatusKeepsEveryFieldAndTheCap) {
  v1::GetStatusResponse s;
  s.set_version("0.1.0");
  s.set_incarnation(0xfeedULL);
  s.set_transport(v1::TRANSPORT_TCP);
  s.set_peer_listen("10.0.0.1:7471");
  s.set_region_count(3);
  s.set_uptime_ms(1500);
  s.set_memlock_limit(0);  // unlimited
  s.set_max_pinned_bytes(16 << 20);
  s.set_max_pinned_bytes_source("config max_pinned_bytes");
  s.set_pinned_bytes(4096);
  const DaemonStatus out = FromProto(s);
  EXPECT_EQ(out.version, "0.1.0");
  EXPECT_EQ(out.incarnation, 0xfeedULL);
  EXPECT_EQ(out.transport, Transport::kTcp);
  EXPECT_EQ(out.peer_address, "10.0.0.1:7471");
  EXPECT_EQ(out.region_count, 3u);
  EXPECT_EQ(out.uptime, absl::Milliseconds(1500));
  EXPECT_EQ(out.memlock_limit, std::nullopt);
  EXPECT_EQ(out.max_pinned_bytes, std::optional<uint64_t>(16 << 20));
  EXPECT_EQ(out.pinned_bytes, 4096u);
}

TEST(ClientConvertTest, QpsSayWhichTransportTheyBelongTo) {
  v1::QpInfo tcp;
  tcp.set_transport(v1::TRANSPORT_TCP);
  tcp.set_local_qpn(2);  // TCP: the connection index
  tcp.set_local_address("10.0.0.1:40000");
  tcp.set_remote_address("10.0.0.2:7472");
  const QpInfo t = FromProto(tcp);
  EXPECT_EQ(t.transport, Transport::kTcp);
  EXPECT_EQ(t.connection, 2u);
  EXPECT_EQ(t.local_qpn, 0u);
  EXPECT_EQ(t.remote_address, "10.0.0.2:7472");
  v1::QpInfo old_verbs;  // from a daemon that did not say
  old_verbs.set_device("rxe0");
  old_verbs.set_local_qpn(17);
  EXPECT_EQ(FromProto(old_verbs).transport, Transport::kVerbs);
  EXPECT_EQ(FromProto(old_verbs).local_qpn, 17u);
}

// Each of `words` (a word the daemon sends, and the state it means) comes
// back from `convert` (the word in a message, through FromProto) as its
// state, whose name (`name_of`) is that word again.
template <typename State, typename Convert>
void ExpectStatesKeepTheirWords(
    std::initializer_list<std::pair<const char*, State>> words,
    absl::string_view (*name_of)(State), Convert convert) {
  for (const auto& [word, state] : words) {
    EXPECT_EQ(convert(word), state) << word;
    if (state != State::kUnknown) {
      EXPECT_EQ(name_of(state), word);
    }
  }
}

// The daemon sends states as the words rdmactl prints: each comes back as
// its enum, whose name is that word again; a word this library does not
// know (a newer daemon's) is kUnknown, not another state.
TEST(ClientConvertTest, StatesBecomeEnumsThatKeepTheDaemonsWords) {
  ExpectStatesKeepTheirWords<PortState>(
      {{"NOP", PortState::kNop},
       {"DOWN", PortState::kDown},
       {"INIT", PortState::kInit},
       {"ARMED", PortState::kArmed},
       {"ACTIVE", PortState::kActive},
       {"ACTIVE_DEFER", PortState::kActiveDefer},
       {"BOGUS", PortState::kUnknown}},
      PortStateName, [](const char* word) {
        v1::ListDevicesResponse devices;
        devices.add_devices()->add_ports()->set_state(word);
        return FromProto(devices).devices[0].ports[0].state;
      });
  ExpectStatesKeepTheirWords<PeerState>(
      {{"NEW", PeerState::kNew},
       {"HELLO", PeerState::kHello},
       {"CONNECTING", PeerState::kConnecting},
       {"READY", PeerState::kReady},
       {"DEGRADED", PeerState::kDegraded},
       {"ERROR", PeerState::kError},
       {"CLOSED", PeerState::kClosed},
       {"FAILED", PeerState::kFailed},
       {"RETIRED", PeerState::kRetired},
       {"", PeerState::kUnknown},
       {"ready", PeerState::kUnknown}},
      PeerStateName, [](const char* word) {
        v1::PeerInfo peer;
        peer.set_state(word);
        return FromProto(peer).state;
      });
  ExpectStatesKeepTheirWords<QpState>(
      {{"RESET", QpState::kReset},
       {"INIT", QpState::kInit},
       {"RTR", QpState::kRtr},
       {"RTS", QpState::kRts},
       {"SQD", QpState::kSqd},
       {"SQE", QpState::kSqe},
       {"ERR", QpState::kErr},
       {"DESTROYED", QpState::kDestroyed},
       {"IDLE", QpState::kIdle},
       {"CONNECTING", QpState::kConnecting},
       {"READY", QpState::kReady},
       {"ERROR", QpState::kError},
       {"CLOSED", QpState::kClosed},
       {"UNKNOWN(9)", QpState::kUnknown}},
      QpStateName, [](const char* word) {
        v1::QpInfo qp;
        qp.set_state(word);
        return FromProto(qp).state;
      });
  ExpectStatesKeepTheirWords<RailState>(
      {{"ACTIVE", RailState::kActive},
       {"PROBING", RailState::kProbing},
       {"PAUSED", RailState::kPaused},
       {"REBUILDING", RailState::kRebuilding},
       {"active", RailState::kUnknown}},
      RailStateName, [](const char* word) {
        v1::PeerInfo peer;
        peer.add_rails()->set_state(word);
        return FromProto(peer).rails[0].state;
      });
  ExpectStatesKeepTheirWords<DirectoryState>(
      {{"connecting", DirectoryState::kConnecting},
       {"connected", DirectoryState::kConnected},
       {"disconnected", DirectoryState::kDisconnected},
       {"stopped", DirectoryState::kStopped},
       {"CONNECTED", DirectoryState::kUnknown}},
      DirectoryStateName, [](const char* word) {
        v1::DirectoryStatus directory;
        directory.set_state(word);
        return FromProto(directory).state;
      });
  EXPECT_EQ(PortStateName(PortState::kUnknown), "UNKNOWN");
  EXPECT_EQ(DirectoryStateName(DirectoryState::kUnknown), "unknown");
}

TEST(ClientConvertTest, DevicesCarryTheirNoticeReceiveQueue) {
  v1::ListDevicesResponse response;
  response.add_devices()->set_name("mlx5_0");
  v1::DeviceInfo* with = response.add_devices();
  with->set_name("mlx5_1");
  with->mutable_notice_receives()->set_depth(1024);
  with->mutable_notice_receives()->set_posted(1000);
  with->mutable_notice_receives()->set_reposts(3);
  const DeviceList list = FromProto(response);
  ASSERT_EQ(list.devices.size(), 2u);
  EXPECT_FALSE(list.devices[0].notice_receives.has_value());
  ASSERT_TRUE(list.devices[1].notice_receives.has_value());
  EXPECT_EQ(list.devices[1].notice_receives->depth, 1024u);
  EXPECT_EQ(list.devices[1].notice_receives->posted, 1000u);
  EXPECT_EQ(list.devices[1].notice_receives->reposts, 3u);
}

TEST(ClientConvertTest, PeersCarryTheirRailsAndQpsTheirRail) {
  v1::PeerInfo peer;
  v1::RailInfo* rail = peer.add_rails();
  rail->set_index(1);
  rail->set_device("mlx5_1");
  rail->set_port(1);
  rail->set_remote_device("mlx5_3");
  rail->set_state("PAUSED");
  rail->set_bytes(4096);
  rail->set_ops(2);
  rail->set_errors(3);
  rail->set_pauses(1);
  rail->set_paused_ms_left(2500);
  rail->set_bandwidth_bytes_per_second(12345);
  rail->set_numa_node(1);
  rail->set_last_error("port 1 of mlx5_1 went down");
  const PeerInfo out = FromProto(peer);
  ASSERT_EQ(out.rails.size(), 1u);
  const RailInfo& r = out.rails[0];
  EXPECT_EQ(r.index, 1u);
  EXPECT_EQ(r.device, "mlx5_1");
  EXPECT_EQ(r.remote_device, "mlx5_3");
  EXPECT_EQ(r.state, RailState::kPaused);
  EXPECT_FALSE(r.port_active);
  EXPECT_EQ(r.bytes, 4096u);
  EXPECT_EQ(r.errors, 3u);
  EXPECT_EQ(r.pauses, 1u);
  EXPECT_EQ(r.paused_left, absl::Milliseconds(2500));
  EXPECT_EQ(r.bandwidth_bytes_per_second, 12345u);
  EXPECT_EQ(r.numa_node, 1);
  EXPECT_EQ(r.last_error, "port 1 of mlx5_1 went down");
  v1::QpInfo qp;
  qp.set_transport(v1::TRANSPORT_VERBS);
  qp.set_rail(1);
  EXPECT_EQ(FromProto(qp).rail, 1u);
}

TEST(ClientConvertTest, AStoppedQueueKeepsItsReasonWhateverItsCode) {
  v1::QueueInfo q;
  q.set_queue_id(3);
  q.set_pid(77);
  q.set_opened_unix_ms(1500);
  q.set_client_wakeups(5);
  QueueInfo running = FromProto(q);
  EXPECT_EQ(running.id, 3u);
  EXPECT_EQ(running.pid, 77);
  EXPECT_EQ(running.opened, absl::FromUnixMillis(1500));
  EXPECT_EQ(running.client_wakeups, 5u);
  EXPECT_TRUE(running.stop_reason.ok());
  q.set_stopped(true);
  q.set_stop_code(static_cast<int>(absl::StatusCode::kDataLoss));
  q.set_stop_message("entry 3 is corrupt");
  EXPECT_EQ(FromProto(q).stop_reason,
            absl::DataLossError("entry 3 is corrupt"));
  // A code this library does not know, or none: still stopped.
  q.set_stop_code(99);
  EXPECT_EQ(FromProto(q).stop_reason.code(), absl::StatusCode::kUnknown);
  q.set_stop_code(0);
  q.set_stop_message("");
  EXPECT_FALSE(FromProto(q).stop_reason.ok());
}

TEST(ClientConvertTest, RegionsAndAccess) {
  v1::RegionInfo r;
  r.set_id(9);
  r.set_name("kv");
  r.set_size(4096);
  r.set_owner(v1::REGION_OWNER_DAEMON);
  r.set_mode(0640);
  r.set_export_access(v1::ACCESS_READ);
  r.add_keys()->set_device("rxe0");
  const RegionInfo out = FromProto(r);
  EXPECT_EQ(out.owner, RegionOwner::kDaemon);
  EXPECT_EQ(out.mode, 0640u);
  EXPECT_EQ(out.export_access, Access::kRead);
  ASSERT_EQ(out.keys.size(), 1u);
  EXPECT_EQ(ToProto(Access::kReadWrite), v1::ACCESS_READ_WRITE);
  EXPECT_EQ(FromProto(v1::ACCESS_WRITE), Access::kWrite);
}

TEST(RemoteRegionTest, DescriptorsTakeAnOffset) {
  auto plain = RemoteRegion::Parse("rdmad1:abc-_DEF");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->descriptor, "rdmad1:abc-_DEF");
  EXPECT_EQ(plain->offset, 0u);
  auto at = RemoteRegion::Parse("rdmad1:abc-_DEF@64K");
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(at->descriptor, "rdmad1:abc-_DEF");
  EXPECT_EQ(at->offset, 65536u);
  EXPECT_FALSE(RemoteRegion::Parse("rdmad1:abc@").ok());
  EXPECT_FALSE(RemoteRegion::Parse("rdmad1:abc@-1").ok());
  auto named = RemoteRegion::Parse("10.0.0.2:7471/kv@4K");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->peer, "10.0.0.2:7471");
  EXPECT_EQ(named->offset, 4096u);
}

}  // namespace
}  // namespace rdmad::client_internal
