// Local access control, quotas and the peer allow-list at unit level, with
// explicit uids and gids (the integration tests run as one user).
//
//   - the file-like permission model of named regions (owner/group/other,
//     first matching class decides, root may do all, supplementary groups);
//   - mode and group validation at creation;
//   - RegionTable: transfers/mapping need the right bits, free/export need
//     the owner, session buffers stay private;
//   - per-uid quotas: regions, pinned bytes, transfers in flight, each
//     RESOURCE_EXHAUSTED naming the quota, and released on free/completion;
//   - revocation: after unexport, re-export and free the TCP data server's
//     check refuses the old key with a precise status;
//   - PeerAllowList parsing and matching (IPv4, IPv6, mapped, CIDR, gRPC).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/core/access_control.h"
#include "daemon/core/peer_allow_list.h"
#include "daemon/core/region_table.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/transport/handshake.h"
#include "daemon/transport/tcp/data_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/held_remote.h"
#include "tests/unit/fakes/tcp_test_util.h"

namespace rdmad::core {
namespace {

using ::testing::HasSubstr;

Caller User(uint64_t session, uint32_t uid, uint32_t gid,
            std::vector<uint32_t> groups = {}) {
  return Caller{session, uid, gid, static_cast<int32_t>(session), groups};
}

// --- the permission model ---------------------------------------------------

TEST(AccessControlTest, FirstMatchingClassDecides) {
  const RegionAcl acl{1000, 100, 0640};
  EXPECT_EQ(PermittedBits(User(1, 1000, 100), acl), kLocalReadWrite);
  EXPECT_EQ(PermittedBits(User(2, 1001, 100), acl), kLocalRead);  // group
  EXPECT_EQ(PermittedBits(User(3, 1002, 200), acl), 0u);          // other
  EXPECT_EQ(PermittedBits(User(4, 0, 0), acl), kLocalReadWrite);  // root
  // An owner whose own bits are empty is not rescued by the others' bits.
  const RegionAcl odd{1000, 100, 0066};
  EXPECT_EQ(PermittedBits(User(1, 1000, 100), odd), 0u);
  EXPECT_EQ(PermittedBits(User(2, 1001, 100), odd), kLocalReadWrite);
  EXPECT_EQ(PermittedBits(User(3, 1002, 7), odd), kLocalReadWrite);
}

TEST(AccessControlTest, SupplementaryGroupsCount) {
  const RegionAcl acl{1000, 500, 0660};
  EXPECT_EQ(PermittedBits(User(1, 1001, 100, {7, 500}), acl), kLocalReadWrite);
  EXPECT_EQ(PermittedBits(User(1, 1001, 100, {7, 8}), acl), 0u);
  EXPECT_TRUE(InGroup(User(1, 1, 2, {3}), 3));
  EXPECT_TRUE(InGroup(User(1, 1, 2, {3}), 2));
  EXPECT_FALSE(InGroup(User(1, 1, 2, {3}), 4));
}

TEST(AccessControlTest, DeniedMessageNamesWhatAndHow) {
  const RegionAcl acl{1000, 100, 0604};
  absl::Status s =
      CheckLocalAccess(User(1, 1002, 200), acl, kLocalWrite, "region 'kv'");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("uid 1002 may not write region 'kv'"));
  EXPECT_THAT(s.message(), HasSubstr("mode 0604"));
  EXPECT_THAT(s.message(), HasSubstr("rdmactl chmod"));
  EXPECT_TRUE(
      CheckLocalAccess(User(1, 1002, 200), acl, kLocalRead, "region 'kv'").ok());
  EXPECT_EQ(CheckOwner(User(1, 1002, 100), acl, "region 'kv'").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(CheckOwner(User(1, 1000, 1), acl, "region 'kv'").ok());
  EXPECT_TRUE(CheckOwner(User(1, 0, 0), acl, "region 'kv'").ok());
}

TEST(AccessControlTest, TakesRightsAwayWhenABitOrTheGroupsBitsGo) {
  const RegionAcl acl{1000, 100, 0640};
  EXPECT_FALSE(TakesRightsAway(acl, acl));
  EXPECT_FALSE(TakesRightsAway(acl, {1000, 100, 0664})) << "only added";
  EXPECT_TRUE(TakesRightsAway(acl, {1000, 100, 0600})) << "group read";
  EXPECT_TRUE(TakesRightsAway(acl, {1000, 100, 0440})) << "owner write";
  EXPECT_TRUE(TakesRightsAway(acl, {1000, 200, 0640})) << "another group";
  EXPECT_FALSE(TakesRightsAway({1000, 100, 0604}, {1000, 200, 0604}))
      << "a new group where the group class has no bits";
}

TEST(AccessControlTest, MakeAclValidatesModeAndGroup) {
  const Caller alice = User(1, 1000, 100, {200});
  auto acl = MakeAcl(alice, 0, std::nullopt);
  ASSERT_TRUE(acl.ok());
  EXPECT_EQ(acl->mode, 0600u);
  EXPECT_EQ(acl->uid, 1000u);
  EXPECT_EQ(acl->gid, 100u);
  acl = MakeAcl(alice, 0640, 200);
  ASSERT_TRUE(acl.ok()) << acl.status();
  EXPECT_EQ(acl->gid, 200u);
  for (uint32_t bad : {0755u, 01600u, 07777u, 0100u, 0x10000u}) {
    auto r = MakeAcl(alice, bad, std::nullopt);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("read (4) and write (2)"));
  }
  auto foreign = MakeAcl(alice, 0660, 300);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(foreign.status().message(), HasSubstr("not in group 300"));
  EXPECT_TRUE(MakeAcl(User(1, 0, 0), 0660, 300).ok());  // root: any group
  EXPECT_EQ(FormatMode(0640), "0640");
}

// --- the region table -------------------------------------------------------

class RegionAclTest : public ::testing::Test {
 protected:
  AllocateOptions Named(std::string name, uint32_t mode = 0,
                        std::optional<uint32_t> group = std::nullopt) {
    AllocateOptions o;
    o.name = std::move(name);
    o.size = 4096;
    o.daemon_owned = true;
    o.mode = mode;
    o.group = group;
    return o;
  }

  NullRegistrar registrar_;
  RegionTable table_{&registrar_, RegionLimits{0, 1ull << 30}};
  const Caller alice_ = User(1, 1000, 100);
  const Caller bob_in_group_ = User(2, 1001, 999, {100});
  const Caller carol_ = User(3, 1002, 300);
  const Caller root_ = User(4, 0, 0);
};

TEST_F(RegionAclTest, DefaultModeIsPrivateToTheOwner) {
  ASSERT_TRUE(table_.Allocate(alice_, Named("priv")).ok());
  EXPECT_TRUE(table_.FindForUse(alice_, {0, "priv"}).ok());
  EXPECT_TRUE(table_.FindForUse(root_, {0, "priv"}).ok());
  for (const Caller& other : {bob_in_group_, carol_}) {
    for (uint32_t need : {kLocalRead, kLocalWrite, kLocalReadWrite}) {
      EXPECT_EQ(table_.FindForUse(other, {0, "priv"}, need).status().code(),
                absl::StatusCode::kPermissionDenied);
    }
  }
  EXPECT_EQ(table_.List()[0].mode, 0600u);
}

TEST_F(RegionAclTest, GroupAndOtherBitsGrantExactlyWhatTheySay) {
  ASSERT_TRUE(table_.Allocate(alice_, Named("shared", 0664)).ok());
  EXPECT_TRUE(table_.FindForUse(bob_in_group_, {0, "shared"}).ok());
  EXPECT_TRUE(table_.FindForUse(carol_, {0, "shared"}, kLocalRead).ok());
  EXPECT_EQ(table_.FindForUse(carol_, {0, "shared"}, kLocalWrite).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Use is not management: only the owner (or root) frees or exports.
  EXPECT_EQ(table_.Free(bob_in_group_, {0, "shared"}).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(table_.Export(bob_in_group_, {0, "shared"}, RemoteAccess::kRead)
                .status()
                .code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(table_.Export(alice_, {0, "shared"}, RemoteAccess::kRead).ok());
  EXPECT_TRUE(table_.Free(root_, {0, "shared"}).ok());
}

TEST_F(RegionAclTest, GroupMustBeOneOfTheCreators) {
  EXPECT_EQ(table_.Allocate(alice_, Named("g", 0660, 300)).status().code(),
            absl::StatusCode::kPermissionDenied);
  auto r = table_.Allocate(bob_in_group_, Named("g", 0660, 100));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->Snapshot().owner_gid, 100u);
  EXPECT_TRUE(table_.FindForUse(alice_, {0, "g"}).ok());  // alice is in 100
  EXPECT_EQ(table_.FindForUse(carol_, {0, "g"}, kLocalRead).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(RegionAclTest, SessionBuffersStayPrivateWhateverTheMode) {
  AllocateOptions o;
  o.size = 100;
  o.mode = 0666;
  EXPECT_EQ(table_.Allocate(alice_, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.mode = 0;
  auto buffer = table_.Allocate(alice_, o);
  ASSERT_TRUE(buffer.ok());
  const RegionKey key{(*buffer)->id(), ""};
  // Same uid, another session: still not its buffer.
  EXPECT_EQ(table_.FindForUse(User(9, 1000, 100), key).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(table_.FindForUse(root_, key).status().code(),
            absl::StatusCode::kPermissionDenied);
}

// --- quotas -----------------------------------------------------------------

TEST(QuotaTest, RegionsPerUid) {
  NullRegistrar registrar;
  RegionLimits limits{0, 1ull << 30};
  limits.max_regions_per_uid = 2;
  RegionTable table(&registrar, limits);
  const Caller alice = User(1, 1000, 100);
  AllocateOptions o;
  o.size = 100;
  ASSERT_TRUE(table.Allocate(alice, o).ok());
  auto second = table.Allocate(alice, o);
  ASSERT_TRUE(second.ok());
  auto third = table.Allocate(alice, o);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("quota_regions_per_uid"));
  EXPECT_THAT(third.status().message(), HasSubstr("uid 1000"));
  // Another uid has its own quota.
  EXPECT_TRUE(table.Allocate(User(2, 1001, 100), o).ok());
  // Freeing gives the slot back.
  ASSERT_TRUE(table.Free(alice, {(*second)->id(), ""}).ok());
  EXPECT_TRUE(table.Allocate(alice, o).ok());
  // A session ending frees its buffers' charge too.
  EXPECT_EQ(table.UsageOf(1000).regions, 2u);
  table.FreeSession(1);
  EXPECT_EQ(table.UsageOf(1000).regions, 0u);
  EXPECT_EQ(table.UsageOf(1000).pinned_bytes, 0u);
}

TEST(QuotaTest, PinnedBytesPerUid) {
  NullRegistrar registrar;
  RegionLimits limits{0, 1ull << 30};
  limits.max_pinned_bytes_per_uid = 3 * 4096;
  RegionTable table(&registrar, limits);
  const Caller alice = User(1, 1000, 100);
  AllocateOptions o;
  o.size = 2 * 4096;
  auto first = table.Allocate(alice, o);
  ASSERT_TRUE(first.ok());
  auto over = table.Allocate(alice, o);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("quota_pinned_bytes_per_uid"));
  o.size = ~0ull;  // no overflow in the check
  EXPECT_NE(table.Allocate(alice, o).status().code(), absl::StatusCode::kOk);
  o.size = 4096;
  EXPECT_TRUE(table.Allocate(alice, o).ok());
  EXPECT_EQ(table.UsageOf(1000).pinned_bytes, 3u * 4096);
}

using testing::HeldRemote;

TEST(QuotaTest, TransfersInFlightPerUid) {
  NullRegistrar registrar;
  RegionTable table(&registrar, RegionLimits{0, 1ull << 30});
  HeldRemote remote;
  TransferEngine engine(&table, &remote, TransferLimits{2});
  const Caller alice = User(1, 1000, 100);
  AllocateOptions o;
  o.size = 100;
  o.name = "src";
  ASSERT_TRUE(table.Allocate(alice, o).ok());
  TransferSpec request;
  request.local = {0, "src"};
  request.remote.peer = "127.0.0.1:1";
  request.remote.name = "dst";
  request.length = 10;
  std::vector<absl::Status> results;
  auto record = [&](absl::StatusOr<TransferResult> r) {
    results.push_back(r.status());
  };
  engine.Submit(alice, request, record);
  engine.Submit(alice, request, record);
  EXPECT_EQ(engine.InFlight(1000), 2u);
  engine.Submit(alice, request, record);  // over the quota: fails at once
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(results[0].message(), HasSubstr("quota_transfers_per_uid"));
  remote.FinishAll();
  EXPECT_EQ(engine.InFlight(1000), 0u);
  ASSERT_EQ(results.size(), 3u);
  engine.Submit(alice, request, record);  // slots came back
  EXPECT_EQ(engine.InFlight(1000), 1u);
  // A failed local check gives its slot back at once.
  request.local = {0, "missing"};
  engine.Submit(alice, request, record);
  EXPECT_EQ(results.back().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine.InFlight(1000), 1u);
  remote.FinishAll();
}

TEST(QuotaTest, TransfersNeedReadToSendAndWriteToReceive) {
  NullRegistrar registrar;
  RegionTable table(&registrar, RegionLimits{0, 1ull << 30});
  HeldRemote remote;
  TransferEngine engine(&table, &remote);
  AllocateOptions o;
  o.size = 100;
  o.name = "readable";
  o.daemon_owned = true;
  o.mode = 0644;
  ASSERT_TRUE(table.Allocate(User(1, 1000, 100), o).ok());
  const Caller carol = User(3, 1002, 300);
  TransferSpec request;
  request.local = {0, "readable"};
  request.remote.peer = "127.0.0.1:1";
  request.remote.name = "dst";
  request.length = 10;
  std::optional<absl::Status> result;
  request.op = OpType::kRead;  // would write into "readable"
  engine.Submit(carol, request,
                [&](absl::StatusOr<TransferResult> r) { result = r.status(); });
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(result->message(), HasSubstr("may not write"));
  result.reset();
  request.op = OpType::kWrite;  // reads "readable": allowed
  engine.Submit(carol, request,
                [&](absl::StatusOr<TransferResult> r) { result = r.status(); });
  remote.FinishAll();
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->ok()) << *result;
}

// --- revocation as the TCP data server sees it ------------------------------

TEST(RevocationTest, UnexportReexportAndFreeInvalidateTheKey) {
  NullRegistrar registrar;
  RegionTable table(&registrar, RegionLimits{0, 1ull << 30});
  const Caller alice = User(1, 1000, 100);
  AllocateOptions o;
  o.size = 4096;
  o.name = "kv";
  o.daemon_owned = true;
  o.export_access = RemoteAccess::kReadWrite;
  auto region = table.Allocate(alice, o);
  ASSERT_TRUE(region.ok());
  tcp::FrameHeader h;
  h.type = tcp::FrameType::kWrite;
  h.region_id = (*region)->id();
  h.key = (*region)->exported().tcp_key;
  h.offset = 0;
  h.length = 16;
  ASSERT_TRUE(tcp::CheckRequest(table, h).ok());

  // Unexport: the region is no longer visible to peers.
  ASSERT_TRUE(table.Export(alice, {0, "kv"}, RemoteAccess::kNone).ok());
  auto s = tcp::CheckRequest(table, h).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("not exported"));

  // Re-export: a new key; the old one is refused.
  ASSERT_TRUE(table.Export(alice, {0, "kv"}, RemoteAccess::kRead).ok());
  s = tcp::CheckRequest(table, h).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("key does not match"));
  // With the new key, only the access granted.
  h.key = (*region)->exported().tcp_key;
  s = tcp::CheckRequest(table, h).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("read-only"));
  h.type = tcp::FrameType::kRead;
  EXPECT_TRUE(tcp::CheckRequest(table, h).ok());

  // Free: gone, even though this test still holds the Region.
  ASSERT_TRUE(table.Free(alice, {0, "kv"}).ok());
  s = tcp::CheckRequest(table, h).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*region)->exported().tcp_key, 0u);
}

// --- data connections a peer may hold --------------------------------------

int ConnectLoopback(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 &&
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A TCP data server with `options` on its own loops, serving an empty
// region table: what DataServerLimitsTest connects to.
struct DataServerOnLoopback {
  void Start(const tcp::TcpDataServerOptions& options, int threads) {
    auto started = runtime::IoRuntime::Start({.threads = threads});
    ASSERT_TRUE(started.ok()) << started.status();
    runtime = *std::move(started);
    auto made = tcp::TcpDataServer::Start(&table, options, runtime.get());
    ASSERT_TRUE(made.ok()) << made.status();
    server = *std::move(made);
  }
  NullRegistrar registrar;
  RegionTable table{&registrar, RegionLimits{0, 1ull << 30}};
  std::unique_ptr<runtime::IoRuntime> runtime;  // outlives the server
  std::unique_ptr<tcp::TcpDataServer> server;
};

TEST(DataServerLimitsTest, ConnectionsOverTheCapAreClosedAtAccept) {
  DataServerOnLoopback s;
  tcp::TcpDataServerOptions options;
  options.max_open_connections = 2;
  ASSERT_NO_FATAL_FAILURE(s.Start(options, 1));
  auto& server = s.server;
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) {
    fds.push_back(ConnectLoopback(server->port()));
    ASSERT_GE(fds.back(), 0);
  }
  // The third is closed by the server without a byte sent (if it were kept,
  // recv fails after the timeout instead of returning 0).
  timeval tv{10, 0};
  ::setsockopt(fds[2], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char byte = 0;
  EXPECT_EQ(::recv(fds[2], &byte, 1, 0), 0);
  EXPECT_EQ(server->stats().refused, 1u);
  EXPECT_EQ(server->stats().connections_open, 2u);
  for (int fd : fds) ::close(fd);
  server->Stop();
}

// Waits (up to 10 s) until the server counts `n` open connections.
bool WaitForOpen(const tcp::TcpDataServer& server, uint64_t n) {
  for (int i = 0; i < 1000; ++i) {
    if (server.stats().connections_open == n) return true;
    ::usleep(10000);
  }
  return false;
}

// Whether the server closed `fd` without a byte sent (10 s at most).
bool ClosedAtAccept(int fd) {
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char byte = 0;
  return ::recv(fd, &byte, 1, 0) == 0;
}

// One address cannot take every slot of the data port: past its cap its
// connections are closed at accept, while another address still gets in;
// a slot comes back when its connection closes.
TEST(DataServerLimitsTest, OneAddressCannotHoldEverySlot) {
  DataServerOnLoopback s;
  tcp::TcpDataServerOptions options;
  options.max_open_connections = 8;
  options.max_connections_per_address = 3;
  options.cap_loopback = true;  // loopback is all a test may use
  ASSERT_NO_FATAL_FAILURE(s.Start(options, 2));
  auto& server = s.server;
  const uint16_t port = server->port();

  std::vector<tcp::testing::RawConnection> mine;
  for (int i = 0; i < 3; ++i) {
    auto c = tcp::testing::RawConnection::Connect(port, "127.0.0.1");
    ASSERT_TRUE(c.ok()) << c.status();
    mine.push_back(*std::move(c));
  }
  ASSERT_TRUE(WaitForOpen(*server, 3));
  auto fourth = tcp::testing::RawConnection::Connect(port, "127.0.0.1");
  ASSERT_TRUE(fourth.ok()) << fourth.status();
  EXPECT_TRUE(ClosedAtAccept(fourth->fd()));
  EXPECT_EQ(server->stats().refused, 1u);

  // Another address is not affected, and is served.
  auto other = tcp::testing::RawConnection::Connect(port, "127.0.0.2");
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(WaitForOpen(*server, 4));
  ASSERT_TRUE(other->Send(tcp::EncodeRequestFrame(tcp::FrameType::kRead, 1,
                                                  12345, 1, 0, 8))
                  .ok());
  auto reply = other->ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->status().code(), absl::StatusCode::kNotFound);

  // Closing one of its connections gives the first address a slot back.
  mine.pop_back();
  ASSERT_TRUE(WaitForOpen(*server, 3));
  auto again = tcp::testing::RawConnection::Connect(port, "127.0.0.1");
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE(WaitForOpen(*server, 4));
  EXPECT_EQ(server->stats().refused, 1u);
  server->Stop();
}

// By default loopback is not capped per address (daemons sharing a host
// all connect from it); the cap on all connections still holds.
TEST(DataServerLimitsTest, LoopbackIsNotCappedPerAddressByDefault) {
  DataServerOnLoopback s;
  tcp::TcpDataServerOptions options;
  options.max_open_connections = 6;
  options.max_connections_per_address = 2;
  ASSERT_NO_FATAL_FAILURE(s.Start(options, 1));
  auto& server = s.server;
  std::vector<tcp::testing::RawConnection> held;
  for (int i = 0; i < 6; ++i) {
    auto c = tcp::testing::RawConnection::Connect(server->port());
    ASSERT_TRUE(c.ok()) << c.status();
    held.push_back(*std::move(c));
  }
  ASSERT_TRUE(WaitForOpen(*server, 6));
  EXPECT_EQ(server->stats().refused, 0u);
  auto seventh = tcp::testing::RawConnection::Connect(server->port());
  ASSERT_TRUE(seventh.ok()) << seventh.status();
  EXPECT_TRUE(ClosedAtAccept(seventh->fd()));
  EXPECT_EQ(server->stats().refused, 1u);
  server->Stop();
}

// --- stale handshakes -------------------------------------------------------

TEST(HandshakeTest, OnlyANewerGenerationOfTheSameIncarnationReplaces) {
  using transport::HandshakeIsStale;
  transport::HandshakeId current{/*incarnation=*/7, /*generation=*/5};
  EXPECT_TRUE(HandshakeIsStale(current, {7, 5}));   // replayed
  EXPECT_TRUE(HandshakeIsStale(current, {7, 4}));   // older, arrived late
  EXPECT_TRUE(HandshakeIsStale(current, {7, 0}));
  EXPECT_FALSE(HandshakeIsStale(current, {7, 6}));  // newer
  // The caller restarted: its generations start again, any is new.
  EXPECT_FALSE(HandshakeIsStale(current, {8, 1}));
  // Nothing served yet.
  EXPECT_FALSE(HandshakeIsStale(std::nullopt, {7, 1}));
}

// --- the peer allow-list ----------------------------------------------------

TEST(PeerAllowListTest, EmptyAllowsEveryone) {
  PeerAllowList all;
  EXPECT_TRUE(all.AllowsGrpcPeer("ipv4:192.0.2.1:5"));
  EXPECT_TRUE(all.AllowsGrpcPeer("unix:/x"));
  EXPECT_EQ(all.ToString(), "any");
}

TEST(PeerAllowListTest, MatchesAddressesAndBlocks) {
  auto list = PeerAllowList::Parse({"10.0.0.0/8", "192.0.2.7", "fd00::/8",
                                    "[::1]"});
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(list->AllowsAddress("10.200.3.4"));
  EXPECT_FALSE(list->AllowsAddress("11.0.0.1"));
  EXPECT_TRUE(list->AllowsAddress("192.0.2.7"));
  EXPECT_FALSE(list->AllowsAddress("192.0.2.8"));
  EXPECT_TRUE(list->AllowsAddress("::ffff:10.1.1.1"));  // mapped IPv4
  EXPECT_TRUE(list->AllowsAddress("fd12::1"));
  EXPECT_FALSE(list->AllowsAddress("fe80::1"));
  EXPECT_TRUE(list->AllowsAddress("::1"));
  EXPECT_FALSE(list->AllowsAddress("not-an-ip"));
  EXPECT_TRUE(list->AllowsGrpcPeer("ipv4:10.9.9.9:41000"));
  EXPECT_FALSE(list->AllowsGrpcPeer("ipv4:127.0.0.1:41000"));
  EXPECT_TRUE(list->AllowsGrpcPeer("ipv6:[::1]:41000"));
  EXPECT_TRUE(list->AllowsGrpcPeer("ipv6:[::ffff:192.0.2.7]:1"));
  EXPECT_FALSE(list->AllowsGrpcPeer("unix:/run/x"));
  EXPECT_FALSE(list->AllowsGrpcPeer("ipv4:garbage"));
  sockaddr_storage ss{};
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(0x0a010203);  // 10.1.2.3
  EXPECT_TRUE(list->AllowsSockaddr(ss));
  in->sin_addr.s_addr = htonl(0x7f000001);
  EXPECT_FALSE(list->AllowsSockaddr(ss));
}

TEST(PeerAllowListTest, ZeroPrefixAllowsTheFamily) {
  auto list = PeerAllowList::Parse({"0.0.0.0/0"});
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->AllowsAddress("203.0.113.9"));
  EXPECT_FALSE(list->AllowsAddress("2001:db8::1"));
}

TEST(PeerAllowListTest, BadEntriesAreNamed) {
  for (const char* bad : {"10.0.0.0/33", "::/129", "host.example", "10.0.0.0/",
                          "1.2.3.4/x", "", "10.0.0.0/-1"}) {
    auto list = PeerAllowList::Parse({bad});
    EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(list.status().message(), HasSubstr("peer_allow entry")) << bad;
  }
}

}  // namespace
}  // namespace rdmad::core
