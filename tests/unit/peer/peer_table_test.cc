// The peer layer as a whole (PeerTable with its TransferFlow) against a
// fake connector, fake channels and fake timers: the transfer flow (resolve,
// checks before sending, batches), which failures are retried and how, the
// stale name cache, incarnation changes, descriptors, deadlines, drain,
// and the bounded table.
#include "daemon/peer/peer_table.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/core/region_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/peer_fakes.h"

namespace rdmad::peer {
namespace {

using ::testing::HasSubstr;
using testing::FakeChannel;
using testing::FakeConnector;
using testing::FakeTimers;
using testing::Region;

using testing::kPeer;

class PeerTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::AllocateOptions o;
    o.size = 1 << 20;
    o.name = "src";
    o.daemon_owned = true;
    auto region = regions_.Allocate(core::Caller{1, 0, 0, 1}, o);
    ASSERT_TRUE(region.ok());
    src_ = *region;
    FakeConnector::Remote remote;
    remote.regions["kv"] =
        Region(7, "kv", 4096, core::RemoteAccess::kReadWrite, 0x77);
    remote.regions["ro"] = Region(8, "ro", 4096, core::RemoteAccess::kRead, 0x88);
    connector_.SetRemote(kPeer, remote);
    MakeTable(PeerTableOptions{});
  }

  void MakeTable(PeerTableOptions options) {
    table_ = std::make_unique<PeerTable>(options, &connector_, &timers_);
  }

  core::Transfer Make(const std::string& peer, const std::string& name,
                      uint64_t length = 100, uint64_t offset = 0,
                      core::OpType op = core::OpType::kWrite) {
    core::Transfer t;
    t.op = op;
    t.local = src_;
    t.length = length;
    t.remote.peer = peer;
    t.remote.name = name;
    t.remote.offset = offset;
    t.deadline = timers_.Now() + absl::Seconds(10);
    t.uid = 1000;
    t.start = timers_.Now();
    return t;
  }

  // Submits one transfer; returns its result once done (the fakes answer
  // inline unless a test holds them).
  std::optional<absl::StatusOr<core::TransferResult>> Run(core::Transfer t) {
    std::optional<absl::StatusOr<core::TransferResult>> out;
    t.done = [&out](absl::StatusOr<core::TransferResult> r) {
      out = std::move(r);
    };
    table_->SubmitBatch(absl::MakeSpan(&t, 1));
    return out;
  }
  absl::Status RunStatus(core::Transfer t) {
    auto out = Run(std::move(t));
    return out.has_value() ? out->status() : absl::InternalError("not done");
  }

  // Peer `i` of the test's network `net` (10.net.x.y), made reachable:
  // it serves kPeer's regions.
  std::string ReachablePeer(int net, int i) {
    const std::string address =
        absl::StrCat("10.", net, ".", i / 256, ".", i % 256, ":7471");
    connector_.SetRemote(address, connector_.remote(kPeer));
    return address;
  }

  // One WRITE to `peer` for `uid`, run to its end.
  absl::Status UseAs(const std::string& peer, uint32_t uid) {
    core::Transfer t = Make(peer, "kv");
    t.uid = uid;
    return RunStatus(std::move(t));
  }

  std::shared_ptr<FakeChannel> Channel(size_t i = 0) {
    auto channels = connector_.channels(kPeer);
    return i < channels.size() ? channels[i] : nullptr;
  }

  FakeTimers timers_;
  FakeConnector connector_;
  core::NullRegistrar registrar_;
  core::RegionTable regions_{&registrar_, core::RegionLimits{}};
  std::shared_ptr<core::Region> src_;
  std::unique_ptr<PeerTable> table_;
};

TEST_F(PeerTableTest, ResolvesOnceThenUsesTheCacheAndCounts) {
  auto out = Run(Make(kPeer, "kv", 100));
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(out->ok()) << out->status();
  EXPECT_EQ((*out)->bytes, 100u);
  EXPECT_EQ((*out)->transport, core::TransportKind::kTcp);
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv", 50)).ok());
  EXPECT_EQ(connector_.names_resolved(kPeer), 1);
  EXPECT_EQ(connector_.hellos(kPeer), 1);
  // The channel got the TCP key the peer gave for "kv".
  ASSERT_EQ(Channel()->keys().size(), 2u);
  EXPECT_EQ(Channel()->keys()[0].base, 7u);
  EXPECT_EQ(Channel()->keys()[0].key, 0x77u);
  const std::vector<PeerSnapshot> peers = table_->ListPeers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].state, PeerState::kReady);
  EXPECT_EQ(peers[0].bytes_written, 150u);
  EXPECT_EQ(peers[0].ops_completed, 2u);
}

TEST_F(PeerTableTest, ABatchOfReadyTransfersGoesToTheChannelInOnePost) {
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv")).ok());  // connect and resolve
  std::vector<core::Transfer> batch;
  int done = 0;
  for (int i = 0; i < 16; ++i) {
    batch.push_back(Make(kPeer, "kv", 10, 10 * i));
    batch.back().done = [&done](absl::StatusOr<core::TransferResult> r) {
      EXPECT_TRUE(r.ok()) << r.status();
      ++done;
    };
  }
  table_->SubmitBatch(absl::MakeSpan(batch));
  EXPECT_EQ(done, 16);
  EXPECT_EQ(Channel()->batches(), (std::vector<size_t>{1, 16}));
}

TEST_F(PeerTableTest, ChecksRangeAndAccessBeforeSending) {
  absl::Status s = RunStatus(Make(kPeer, "kv", 100, 4000));
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("region 'kv' on 10.0.0.2:7471"));
  s = RunStatus(Make(kPeer, "ro", 10));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("read-only"));
  EXPECT_EQ(Channel()->posted(), 0u);
  EXPECT_TRUE(RunStatus(Make(kPeer, "ro", 10, 0, core::OpType::kRead)).ok());
}

// A transfer the cluster directory routed goes only to a peer trusted to
// hold the name, as that peer answered Hello: nothing is resolved there or
// sent otherwise, whether the link is new or ready, and the cached
// resolution of an earlier transfer does not bypass the check.
TEST_F(PeerTableTest, ADirectoryRoutedTransferGoesOnlyToATrustedHolder) {
  FakeConnector::Remote remote = connector_.remote(kPeer);
  remote.identity = {"10.0.0.2", {"intruder"}};
  connector_.SetRemote(kPeer, remote);
  const core::HolderTrust trust(/*mutual_tls=*/true, core::PeerAllowList());
  auto routed = [&](const std::string& identity) {
    core::Transfer t = Make(kPeer, "kv");
    t.remote.holder_trust = &trust;
    t.remote.expect_identity = identity;
    return t;
  };
  absl::Status s = RunStatus(routed("node-b"));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(s.message(), HasSubstr("'node-b'"));
  EXPECT_THAT(s.message(), HasSubstr("'intruder'"));
  EXPECT_EQ(connector_.names_resolved(kPeer), 0)
      << "not even the name went there";
  EXPECT_EQ(Channel()->posted(), 0u);

  // The same peer by address, as a client named it: not the directory's
  // business; then, with its resolution cached, the routed one still fails.
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  EXPECT_EQ(RunStatus(routed("node-b")).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Channel()->posted(), 1u);

  // The certificate the record names: sent.
  EXPECT_TRUE(RunStatus(routed("intruder")).ok());
  EXPECT_EQ(Channel()->posted(), 2u);
}

TEST_F(PeerTableTest, UnavailableIsRetriedOnceAfterANewHello) {
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  Channel()->FailNext({absl::UnavailableError("connection lost")});
  EXPECT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  EXPECT_EQ(connector_.hellos(kPeer), 2);
  EXPECT_EQ(Channel()->posted(), 3u);
  // Twice in a row: the one retry is spent, the error comes back.
  Channel()->FailNext({absl::UnavailableError("lost"),
                       absl::UnavailableError("lost again")});
  absl::Status s = RunStatus(Make(kPeer, "kv"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "lost again");
}

// Its notification may have reached the owner before the connection was
// lost: a retry could tell the owner twice (found by the peer review).
TEST_F(PeerTableTest, AWriteWithAnImmediateIsNotRetriedAfterUnavailable) {
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  const size_t before = Channel()->posted();
  Channel()->FailNext({absl::UnavailableError("connection lost")});
  core::Transfer t = Make(kPeer, "kv");
  t.immediate = 42;
  absl::Status s = RunStatus(std::move(t));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("connection lost"));
  EXPECT_THAT(s.message(),
              HasSubstr("a WRITE with an immediate is not retried"));
  EXPECT_EQ(Channel()->posted(), before + 1) << "retried";
  // The connection is still marked stale: the next transfer says Hello.
  EXPECT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  EXPECT_EQ(connector_.hellos(kPeer), 2);
}

TEST_F(PeerTableTest, OtherErrorsAreNotRetriedAndKeepTheirCodes) {
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  for (absl::StatusCode code :
       {absl::StatusCode::kInternal, absl::StatusCode::kUnknown,
        absl::StatusCode::kUnimplemented, absl::StatusCode::kOutOfRange,
        absl::StatusCode::kDeadlineExceeded,
        absl::StatusCode::kResourceExhausted}) {
    const size_t before = Channel()->posted();
    Channel()->FailNext({absl::Status(code, "from the peer")});
    absl::Status s = RunStatus(Make(kPeer, "kv"));
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_EQ(Channel()->posted(), before + 1) << "retried " << s;
  }
  EXPECT_EQ(connector_.hellos(kPeer), 1);
}

TEST_F(PeerTableTest, AStaleCachedKeyIsResolvedAgainOnce) {
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  // "kv" was re-exported: new key; the cached one is refused.
  connector_.remote(kPeer).regions["kv"].tcp_key = 0x99;
  Channel()->FailNext({absl::PermissionDeniedError("key does not match")});
  EXPECT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  EXPECT_EQ(connector_.names_resolved(kPeer), 2);
  EXPECT_EQ(Channel()->keys().back().key, 0x99u);
  // NOT_FOUND straight after a fresh Resolve is the answer, not staleness.
  table_ = nullptr;
  MakeTable(PeerTableOptions{});
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv")).ok());  // new table, new cache
  Channel(1)->FailNext({absl::NotFoundError("freed")});
  connector_.remote(kPeer).regions.erase("kv");
  absl::Status s = RunStatus(Make(kPeer, "kv"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  s = RunStatus(Make(kPeer, "kv"));  // resolves now, and is not retried
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("no region kv"));
}

TEST_F(PeerTableTest, ARestartedPeerGetsANewChannelAndFreshNames) {
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  connector_.remote(kPeer).incarnation = 2;
  Channel()->FailNext({absl::UnavailableError("peer closed the connection")});
  EXPECT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  EXPECT_TRUE(Channel(0)->closed());
  ASSERT_NE(Channel(1), nullptr);
  EXPECT_EQ(Channel(1)->posted(), 1u);
  EXPECT_EQ(connector_.names_resolved(kPeer), 2);
  EXPECT_EQ(table_->ListPeers()[0].incarnation, 2u);
}

// The peer restarted while this daemon was idle: no connection failed
// under a transfer, so nothing said Hello again, and the first transfer
// goes out on the old link with the old run's key. The new run refuses it
// (PERMISSION_DENIED or NOT_FOUND); the one retry must go through a new
// Hello, which finds the new run, instead of resolving under the old one
// and failing UNAVAILABLE "restarted since Hello".
TEST_F(PeerTableTest, APeerRestartedWhileIdleIsFoundByTheRetryOfAStaleKey) {
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  connector_.remote(kPeer).incarnation = 2;
  connector_.remote(kPeer).regions["kv"].tcp_key = 0x99;
  Channel()->FailNext({absl::PermissionDeniedError("key does not match")});
  const absl::Status s = RunStatus(Make(kPeer, "kv"));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(Channel(0)->closed());
  ASSERT_NE(Channel(1), nullptr);
  EXPECT_EQ(Channel(1)->keys().back().key, 0x99u);
  EXPECT_EQ(table_->ListPeers()[0].incarnation, 2u);
}

TEST_F(PeerTableTest, DescriptorOfAnotherRunAsksThePeerFirst) {
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  auto descriptor = std::make_shared<core::RemoteRegionInfo>(
      Region(7, "kv", 4096, core::RemoteAccess::kReadWrite, 0x77));
  descriptor->peer = kPeer;
  descriptor->incarnation = 5;
  // Issued by a run we have not met: maybe the peer restarted. It did not.
  core::Transfer t = Make(kPeer, "");
  t.remote.descriptor = descriptor;
  absl::Status s = RunStatus(std::move(t));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("earlier run"));
  EXPECT_EQ(connector_.hellos(kPeer), 2);
  // It did restart (to the descriptor's run): the descriptor is good.
  connector_.remote(kPeer).incarnation = 5;
  t = Make(kPeer, "");
  t.remote.descriptor = descriptor;
  EXPECT_TRUE(RunStatus(std::move(t)).ok());
  EXPECT_EQ(connector_.names_resolved(kPeer), 1)
      << "a descriptor needs no Resolve";
}

TEST_F(PeerTableTest, AHandshakeThatDoesNotAnswerFailsAtTheDeadline) {
  connector_.set_hold_hello(true);
  core::Transfer t = Make(kPeer, "kv");
  t.deadline = timers_.Now() + absl::Seconds(1);
  std::optional<absl::StatusOr<core::TransferResult>> out;
  t.done = [&out](absl::StatusOr<core::TransferResult> r) { out = r; };
  table_->SubmitBatch(absl::MakeSpan(&t, 1));
  EXPECT_FALSE(out.has_value());
  timers_.Advance(absl::Seconds(2));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->status().code(), absl::StatusCode::kDeadlineExceeded);
  connector_.ReleaseHellos();
}

TEST_F(PeerTableTest, DrainRefusesNewTransfersAndEndsHeldOnesAtItsDeadline) {
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  Channel()->set_hold(true);
  std::optional<absl::StatusOr<core::TransferResult>> held;
  core::Transfer t = Make(kPeer, "kv");
  t.deadline = absl::InfiniteFuture();
  t.done = [&held](absl::StatusOr<core::TransferResult> r) { held = r; };
  table_->SubmitBatch(absl::MakeSpan(&t, 1));
  table_->Drain(timers_.Now() + absl::Seconds(5));
  absl::Status s = RunStatus(Make(kPeer, "kv"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("shutting down"));
  timers_.Advance(absl::Seconds(4));
  EXPECT_FALSE(held.has_value());
  timers_.Advance(absl::Seconds(2));
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Channel()->closed());
}

TEST_F(PeerTableTest, ShutdownFailsWaitersAndRefusesMore) {
  connector_.set_hold_hello(true);
  std::optional<absl::StatusOr<core::TransferResult>> out;
  core::Transfer t = Make(kPeer, "kv");
  t.done = [&out](absl::StatusOr<core::TransferResult> r) { out = r; };
  table_->SubmitBatch(absl::MakeSpan(&t, 1));
  table_->Shutdown();
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(RunStatus(Make(kPeer, "kv")).code(),
            absl::StatusCode::kUnavailable);
  connector_.ReleaseHellos();
}

TEST_F(PeerTableTest, TheTableIsBoundedAndFailedPeersMakeRoom) {
  PeerTableOptions options;
  options.max_peers = 2;
  MakeTable(options);
  connector_.SetRemote("10.0.0.3:7471", connector_.remote(kPeer));
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  // Unreachable: its entry stays, FAILED, until someone needs the room.
  EXPECT_EQ(RunStatus(Make("10.9.9.9:7471", "kv")).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(table_->size(), 2u);
  ASSERT_TRUE(RunStatus(Make("10.0.0.3:7471", "kv")).ok());
  EXPECT_EQ(table_->size(), 2u);
  EXPECT_EQ(connector_.forgets("10.9.9.9:7471"), 2)
      << "forgotten after the failure and again when evicted";
  // Two healthy peers with transfers under way: a third is refused, and
  // says why.
  for (const char* busy : {kPeer, "10.0.0.3:7471"}) {
    connector_.channels(busy)[0]->set_hold(true);
    core::Transfer t = Make(busy, "kv");
    t.deadline = absl::InfiniteFuture();
    t.done = [](absl::StatusOr<core::TransferResult>) {};
    table_->SubmitBatch(absl::MakeSpan(&t, 1));
  }
  absl::Status s = RunStatus(Make("10.0.0.4:7471", "kv"));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("max_peers"));
  // Once one is idle, it makes room: the same uid's idlest peer goes.
  connector_.channels("10.0.0.3:7471")[0]->Release(absl::OkStatus());
  connector_.SetRemote("10.0.0.4:7471", connector_.remote(kPeer));
  EXPECT_TRUE(RunStatus(Make("10.0.0.4:7471", "kv")).ok());
  EXPECT_EQ(table_->size(), 2u);
  EXPECT_EQ(connector_.forgets("10.0.0.3:7471"), 1);
  Channel()->Release(absl::OkStatus());
}

// One uid that fills the table with peers of its own (live, READY, idle)
// cannot deny another uid new peers: each new peer of the other uid takes
// the idlest slot of the uid that holds the most, until the two hold as
// many; from then on each uid makes room from its own.
TEST_F(PeerTableTest, OneUidFillingTheTableCannotDenyOthersNewPeers) {
  PeerTableOptions options;
  options.max_peers = 4;
  MakeTable(options);
  auto peer = [](int i) { return absl::StrCat("10.1.0.", i, ":7471"); };
  for (int i = 1; i <= 7; ++i)
    connector_.SetRemote(peer(i), connector_.remote(kPeer));
  auto use = [&](int i, uint32_t uid) {
    core::Transfer t = Make(peer(i), "kv");
    t.uid = uid;
    absl::Status s = RunStatus(std::move(t));
    timers_.Advance(absl::Seconds(1));  // so that idleness has an order
    return s;
  };
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(use(i, 1000).ok()) << i;
  ASSERT_TRUE(use(2, 1000).ok());  // 1 is now the idlest, then 3
  EXPECT_TRUE(use(5, 2000).ok()) << "a full table of another uid's peers";
  EXPECT_EQ(connector_.forgets(peer(1)), 1);
  EXPECT_TRUE(use(6, 2000).ok()) << "uid 1000 still holds more";
  EXPECT_EQ(connector_.forgets(peer(3)), 1);
  // Two each: uid 2000 now makes room from its own slots (5 is its idlest),
  // and so does uid 1000.
  EXPECT_TRUE(use(7, 2000).ok());
  EXPECT_EQ(connector_.forgets(peer(5)), 1);
  EXPECT_EQ(connector_.forgets(peer(2)) + connector_.forgets(peer(4)), 0);
  EXPECT_TRUE(use(1, 1000).ok());
  EXPECT_EQ(connector_.forgets(peer(4)), 1) << "uid 1000's idlest";
  EXPECT_EQ(table_->size(), 4u);
}

// max_peers_per_uid bounds one uid's slots even where the table has room:
// the uid's own idlest peer makes room for its next one, and a uid whose
// peers are all busy is refused, naming the bound.
TEST_F(PeerTableTest, OneUidHoldsAtMostItsShareOfTheSlots) {
  PeerTableOptions options;
  options.max_peers = 8;
  options.max_peers_per_uid = 2;
  MakeTable(options);
  auto peer = [](int i) { return absl::StrCat("10.2.0.", i, ":7471"); };
  for (int i = 1; i <= 4; ++i)
    connector_.SetRemote(peer(i), connector_.remote(kPeer));
  auto make = [&](int i, uint32_t uid) {
    core::Transfer t = Make(peer(i), "kv");
    t.uid = uid;
    return t;
  };
  ASSERT_TRUE(RunStatus(make(1, 1000)).ok());
  timers_.Advance(absl::Seconds(1));
  ASSERT_TRUE(RunStatus(make(2, 1000)).ok());
  timers_.Advance(absl::Seconds(1));
  ASSERT_TRUE(RunStatus(make(3, 1000)).ok());
  EXPECT_EQ(connector_.forgets(peer(1)), 1) << "its own idlest made room";
  EXPECT_EQ(table_->size(), 2u);
  // Another uid is not held to uid 1000's count.
  ASSERT_TRUE(RunStatus(make(1, 2000)).ok());
  EXPECT_EQ(table_->size(), 3u);
  // Both of uid 1000's peers busy: its next peer is refused.
  for (int i : {2, 3}) {
    connector_.channels(peer(i)).back()->set_hold(true);
    core::Transfer t = make(i, 1000);
    t.deadline = absl::InfiniteFuture();
    t.done = [](absl::StatusOr<core::TransferResult>) {};
    table_->SubmitBatch(absl::MakeSpan(&t, 1));
  }
  absl::Status s = RunStatus(make(4, 1000));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("uid 1000 already holds 2 peers"));
  EXPECT_THAT(s.message(), HasSubstr("max_peers_per_uid"));
  for (int i : {2, 3})
    connector_.channels(peer(i)).back()->Release(absl::OkStatus());
}

// Peers found again by later transfers outlive a peer used once, even
// when the one-time peer was used last (the idlest-first rule it replaced
// would have given up the oldest busy peer).
TEST_F(PeerTableTest, PeersInSteadyUseAreKeptOverAOneTimePeer) {
  PeerTableOptions options;
  options.max_peers = 4;
  MakeTable(options);
  auto peer = [&](int i) { return ReachablePeer(3, i); };
  for (int round = 0; round < 3; ++round) {
    for (int i = 1; i <= 3; ++i) {
      ASSERT_TRUE(UseAs(peer(i), 1000).ok()) << i;
      timers_.Advance(absl::Seconds(1));
    }
  }
  ASSERT_TRUE(UseAs(peer(4), 1000).ok());  // once, and last
  timers_.Advance(absl::Seconds(1));
  ASSERT_TRUE(UseAs(peer(5), 1000).ok());
  EXPECT_EQ(connector_.forgets(peer(4)), 1) << "the one-time peer made room";
  for (int i = 1; i <= 3; ++i) EXPECT_EQ(connector_.forgets(peer(i)), 0) << i;
  EXPECT_EQ(table_->size(), 4u);
}

// A peer with a transfer under way is never given up, however long it has
// been since it was found again: the hand passes it, round after round.
TEST_F(PeerTableTest, APeerWithATransferUnderWayIsNeverEvicted) {
  PeerTableOptions options;
  options.max_peers = 4;
  MakeTable(options);
  auto peer = [&](int i) { return ReachablePeer(4, i); };
  ASSERT_TRUE(UseAs(peer(0), 1000).ok());
  connector_.channels(peer(0))[0]->set_hold(true);
  core::Transfer held = Make(peer(0), "kv");
  held.deadline = absl::InfiniteFuture();
  std::optional<absl::Status> held_done;
  held.done = [&](absl::StatusOr<core::TransferResult> r) {
    held_done = r.status();
  };
  table_->SubmitBatch(absl::MakeSpan(&held, 1));
  for (int i = 1; i <= 40; ++i) {
    ASSERT_TRUE(UseAs(peer(i), 1000).ok()) << i;
    timers_.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(connector_.forgets(peer(0)), 0);
  EXPECT_EQ(connector_.forgets(peer(1)), 1) << "others made room";
  EXPECT_EQ(table_->size(), 4u);
  EXPECT_FALSE(held_done.has_value());
  connector_.channels(peer(0))[0]->Release(absl::OkStatus());
  ASSERT_TRUE(held_done.has_value());
  EXPECT_TRUE(held_done->ok()) << *held_done;
}

// At its own bound a uid gives up its own peers in SIEVE order too: the one
// it uses again is kept, and another uid's peers are not touched.
TEST_F(PeerTableTest, AUidAtItsBoundGivesUpItsOwnUnusedPeerFirst) {
  PeerTableOptions options;
  options.max_peers = 8;
  options.max_peers_per_uid = 3;
  MakeTable(options);
  auto peer = [&](int i) { return ReachablePeer(5, i); };
  auto use = [&](int i, uint32_t uid) { return UseAs(peer(i), uid); };
  ASSERT_TRUE(use(6, 2000).ok());
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(use(i, 1000).ok()) << i;
  ASSERT_TRUE(use(1, 1000).ok());  // the oldest, found again
  ASSERT_TRUE(use(4, 1000).ok());
  EXPECT_EQ(connector_.forgets(peer(1)), 0);
  EXPECT_EQ(connector_.forgets(peer(2)), 1);
  ASSERT_TRUE(use(5, 1000).ok());
  EXPECT_EQ(connector_.forgets(peer(3)), 1);
  EXPECT_EQ(connector_.forgets(peer(6)), 0) << "uid 2000's own";
  EXPECT_EQ(table_->size(), 4u);
}

// 10,000 new peers into a table of 1,024, while a working set of 32 peers
// carries a transfer every few admissions: every transfer succeeds, the
// table stays at its bound, and the working set is never given up.
TEST_F(PeerTableTest, TenThousandNewPeersKeepTheWorkingSet) {
  PeerTableOptions options;
  options.max_peers = 1024;
  options.max_peers_per_uid = 1024;
  options.new_peers_burst = 20000;
  MakeTable(options);
  auto peer = [&](int i) { return ReachablePeer(6, i); };
  constexpr int kWorkingSet = 32;
  constexpr int kPeers = 10000;
  for (int i = 0; i < kWorkingSet; ++i)
    ASSERT_TRUE(UseAs(peer(i), 1000).ok()) << i;
  for (int i = kWorkingSet; i < kWorkingSet + kPeers; ++i) {
    ASSERT_TRUE(UseAs(peer(i), 1000).ok()) << i;
    // Each working peer is used again once every 8 x 32 admissions: more
    // often than the hand comes round the 1,024 slots.
    if (i % 8 == 0) {
      const int again = (i / 8) % kWorkingSet;
      ASSERT_TRUE(UseAs(peer(again), 1000).ok()) << again;
    }
    ASSERT_LE(table_->size(), 1024u);
  }
  EXPECT_EQ(table_->size(), 1024u);
  for (int i = 0; i < kWorkingSet; ++i)
    EXPECT_EQ(connector_.forgets(peer(i)), 0) << peer(i);
  int forgotten = 0;
  for (int i = kWorkingSet; i < kWorkingSet + kPeers; ++i)
    forgotten += connector_.forgets(peer(i));
  EXPECT_EQ(forgotten, kWorkingSet + kPeers - 1024);
}

TEST_F(PeerTableTest, NewPeersPerUidAreRateLimited) {
  PeerTableOptions options;
  options.new_peers_burst = 3;
  options.new_peers_per_second = 1;
  MakeTable(options);
  auto add = [&](int i, uint32_t uid) {
    core::Transfer t = Make(absl::StrCat("10.1.0.", i, ":7471"), "kv");
    t.uid = uid;
    return RunStatus(std::move(t)).code();
  };
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(add(i, 1000), absl::StatusCode::kUnavailable);  // unreachable
  }
  EXPECT_EQ(add(3, 1000), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(add(4, 2000), absl::StatusCode::kUnavailable) << "another uid";
  EXPECT_EQ(add(0, 1000), absl::StatusCode::kUnavailable) << "a known peer";
  timers_.Advance(absl::Seconds(1));
  EXPECT_EQ(add(5, 1000), absl::StatusCode::kUnavailable);
}

TEST_F(PeerTableTest, FailedPeersWithoutTrafficAreForgotten) {
  EXPECT_EQ(RunStatus(Make("10.9.9.9:7471", "kv")).code(),
            absl::StatusCode::kUnavailable);
  ASSERT_TRUE(RunStatus(Make(kPeer, "kv")).ok());
  ASSERT_EQ(table_->ListPeers().size(), 2u);
  EXPECT_EQ(table_->ListPeers()[1].state, PeerState::kFailed);
  EXPECT_THAT(table_->ListPeers()[1].last_error, HasSubstr("unreachable"));
  timers_.Advance(absl::Seconds(30));
  EXPECT_EQ(table_->size(), 2u);
  timers_.Advance(absl::Seconds(40));  // past a minute: the sweep runs
  ASSERT_EQ(table_->size(), 1u);
  EXPECT_EQ(table_->ListPeers()[0].address, kPeer);
}

TEST_F(PeerTableTest, BadAddressesAreRefused) {
  for (const char* bad : {"no-port", "host:0", " 10.0.0.2:7471", "[::1"}) {
    EXPECT_EQ(RunStatus(Make(bad, "kv")).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(table_->size(), 0u);
}

}  // namespace
}  // namespace rdmad::peer
