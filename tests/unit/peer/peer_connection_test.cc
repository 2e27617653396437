// PeerConnection against a fake connector and fake timers: the handshake
// state machine (one Hello carrying the proposal and names; Hello then
// Connect with an older peer), reuse and rebuilding of the channel,
// incarnation changes, busy peers, the admission's bound, failures and
// waiters' deadlines.
#include "daemon/peer/peer_connection.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/peer_fakes.h"

namespace rdmad::peer {
namespace {

using ::testing::HasSubstr;
using testing::FakeConnector;
using testing::FakeTimers;

using testing::kPeer;

class PeerConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override { connector_.SetRemote(kPeer, {}); }

  std::shared_ptr<PeerConnection> Make(
      core::TransportMode mode = core::TransportMode::kAuto) {
    return std::make_shared<PeerConnection>(
        kPeer, mode, PeerConnectionContext{&connector_, &timers_});
  }

  // Acquire that must complete at once (the fakes answer inline).
  absl::StatusOr<Link> AcquireNow(PeerConnection& c) {
    std::optional<absl::StatusOr<Link>> out;
    c.Acquire(timers_.Now() + absl::Seconds(5),
              [&](absl::StatusOr<Link> l) { out = std::move(l); });
    EXPECT_TRUE(out.has_value()) << "Acquire did not complete";
    return out.has_value() ? *std::move(out)
                           : absl::StatusOr<Link>(absl::InternalError("none"));
  }

  FakeTimers timers_;
  FakeConnector connector_;
};

TEST_F(PeerConnectionTest, OlderPeerGetsHelloThenConnectThenReady) {
  connector_.set_old_peers(true);
  auto c = Make();
  EXPECT_EQ(c->Snapshot().state, PeerState::kNew);
  EXPECT_FALSE(c->ReadyLink().has_value());
  auto link = AcquireNow(*c);
  ASSERT_TRUE(link.ok()) << link.status();
  EXPECT_EQ(link->kind, core::TransportKind::kTcp);
  EXPECT_EQ(link->incarnation, 1u);
  EXPECT_EQ(c->Snapshot().state, PeerState::kReady);
  EXPECT_EQ(c->Snapshot().transport_reason,
            "the peer offers no verbs transport");
  // Ready: no more handshakes.
  auto again = AcquireNow(*c);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->channel, link->channel);
  ASSERT_TRUE(c->ReadyLink().has_value());
  EXPECT_EQ(connector_.hellos(kPeer), 1);
  EXPECT_EQ(connector_.connects(kPeer), 1);
}

TEST_F(PeerConnectionTest, OneHelloCarriesTheProposalAndTheNames) {
  std::vector<std::pair<uint64_t, std::vector<ResolvedName>>> delivered;
  auto c = std::make_shared<PeerConnection>(
      kPeer, core::TransportMode::kAuto,
      PeerConnectionContext{&connector_, &timers_},
      [&](uint64_t incarnation, std::vector<ResolvedName> names) {
        delivered.emplace_back(incarnation, std::move(names));
      });
  core::RemoteRegionInfo kv;
  kv.region_id = 7;
  kv.length = 4096;
  kv.incarnation = 1;
  connector_.remote(kPeer).regions["kv"] = kv;
  std::optional<absl::StatusOr<Link>> out;
  c->Acquire(
      timers_.Now() + absl::Seconds(5),
      [&](absl::StatusOr<Link> l) { out = std::move(l); },
      NameRequest{"kv", 1000});
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(out->ok()) << out->status();
  EXPECT_EQ(c->Snapshot().state, PeerState::kReady);
  EXPECT_EQ(connector_.hellos(kPeer), 1);
  EXPECT_EQ(connector_.connects(kPeer), 0) << "ready in one round trip";
  EXPECT_EQ(connector_.resolves(kPeer), 0);
  const Handshake sent = connector_.handshakes(kPeer).at(0);
  // Not knowing the peer's offers yet, it proposes its own choice.
  EXPECT_EQ(sent.propose,
            std::vector<core::TransportKind>{core::TransportKind::kTcp});
  ASSERT_EQ(sent.names.size(), 1u);
  EXPECT_EQ(sent.names[0].name, "kv");
  EXPECT_EQ(sent.names[0].uid, 1000u);
  EXPECT_EQ((*out)->channel, connector_.channels(kPeer).at(0));
  // The answer's names went to the sink before the waiter ran.
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_EQ(delivered[0].first, 1u);
  ASSERT_EQ(delivered[0].second.size(), 1u);
  ASSERT_TRUE(delivered[0].second[0].region.ok());
  EXPECT_EQ(delivered[0].second[0].region->region_id, 7u);
}

TEST_F(PeerConnectionTest, BusyPeerIsAskedAgainAfterABackoff) {
  auto c = Make();
  connector_.remote(kPeer).hello_error =
      absl::ResourceExhaustedError("handshakes as responder are busy");
  std::optional<absl::StatusOr<Link>> out;
  c->Acquire(timers_.Now() + absl::Seconds(30),
             [&](absl::StatusOr<Link> l) { out = std::move(l); });
  EXPECT_FALSE(out.has_value()) << "a busy peer is not a failure";
  EXPECT_EQ(connector_.hellos(kPeer), 1);
  EXPECT_EQ(c->Snapshot().state, PeerState::kHello);
  // The first backoff is drawn from [5, 15) ms, the second from [10, 30)
  // ms after it: at 15 ms the first has run and the second has not.
  timers_.Advance(absl::Milliseconds(15));
  EXPECT_EQ(connector_.hellos(kPeer), 2);
  EXPECT_FALSE(out.has_value());
  connector_.remote(kPeer).hello_error = absl::OkStatus();
  timers_.Advance(absl::Milliseconds(30));
  EXPECT_EQ(connector_.hellos(kPeer), 3);
  ASSERT_TRUE(out.has_value());
  EXPECT_TRUE(out->ok()) << out->status();
}

TEST_F(PeerConnectionTest, BusyPeerStillFailsAtTheWaitersDeadline) {
  auto c = Make();
  connector_.remote(kPeer).hello_error =
      absl::ResourceExhaustedError("handshakes as responder are busy");
  std::optional<absl::StatusOr<Link>> out;
  c->Acquire(timers_.Now() + absl::Seconds(2),
             [&](absl::StatusOr<Link> l) { out = std::move(l); });
  timers_.Advance(absl::Seconds(3));
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->status().code(), absl::StatusCode::kDeadlineExceeded);
  const int hellos = connector_.hellos(kPeer);
  timers_.Advance(absl::Seconds(10));
  EXPECT_EQ(connector_.hellos(kPeer), hellos) << "no one waits: no retries";
}

TEST_F(PeerConnectionTest, AdmissionBoundsTheHandshakesInFlight) {
  HandshakeAdmission admission({.role = "initiator", .max_in_flight = 2},
                               &timers_);
  connector_.set_hold_hello(true);
  std::vector<std::shared_ptr<PeerConnection>> peers;
  std::vector<absl::StatusOr<Link>> out;
  for (int i = 0; i < 5; ++i) {
    const std::string address = absl::StrCat("10.0.1.", i + 1, ":7471");
    connector_.SetRemote(address, {});
    peers.push_back(std::make_shared<PeerConnection>(
        address, core::TransportMode::kAuto,
        PeerConnectionContext{&connector_, &timers_, &admission}));
    peers.back()->Acquire(
        timers_.Now() + absl::Seconds(5),
        [&](absl::StatusOr<Link> l) { out.push_back(std::move(l)); });
  }
  int sent = 0;
  for (int i = 0; i < 5; ++i) {
    sent += connector_.hellos(absl::StrCat("10.0.1.", i + 1, ":7471"));
  }
  EXPECT_EQ(sent, 2) << "the other three wait their turn";
  EXPECT_EQ(admission.stats().queued, 3u);
  // Each answer frees a slot for the next in line.
  for (int round = 0; round < 3 && out.size() < 5; ++round) {
    connector_.ReleaseHellos();
  }
  ASSERT_EQ(out.size(), 5u);
  for (const auto& l : out) EXPECT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(admission.stats().peak_in_flight, 2u);
  EXPECT_EQ(admission.stats().in_flight, 0u);
}

TEST_F(PeerConnectionTest, ConcurrentAcquiresShareOneHandshake) {
  auto c = Make();
  connector_.set_hold_hello(true);
  std::vector<absl::StatusOr<Link>> out;
  for (int i = 0; i < 3; ++i) {
    c->Acquire(timers_.Now() + absl::Seconds(5),
               [&](absl::StatusOr<Link> l) { out.push_back(std::move(l)); });
  }
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(c->Snapshot().state, PeerState::kHello);
  EXPECT_EQ(c->Snapshot().waiters, 3u);
  connector_.ReleaseHellos();
  ASSERT_EQ(out.size(), 3u);
  for (const auto& l : out) {
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_EQ(l->channel, out[0]->channel);
  }
  EXPECT_EQ(connector_.hellos(kPeer), 1);
  EXPECT_EQ(connector_.connects(kPeer), 0) << "the Hello made the channel";
  EXPECT_EQ(timers_.pending(), 0u) << "deadline timers left behind";
}

TEST_F(PeerConnectionTest, StaleSaysHelloAgainAndKeepsTheChannelOfTheSameRun) {
  auto c = Make();
  auto first = AcquireNow(*c);
  ASSERT_TRUE(first.ok());
  c->MarkStale(absl::UnavailableError("connection lost"));
  EXPECT_FALSE(c->ReadyLink().has_value());
  EXPECT_EQ(c->Snapshot().last_error, "connection lost");
  auto second = AcquireNow(*c);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->channel, first->channel);  // TCP reconnects by itself
  EXPECT_EQ(connector_.hellos(kPeer), 2);
  EXPECT_EQ(connector_.connects(kPeer), 0);
  // The second Hello proposed no channel: the one it has may be reused.
  EXPECT_TRUE(connector_.handshakes(kPeer).at(1).propose.empty());
  // The last failure stays on show after the recovery.
  EXPECT_EQ(c->Snapshot().last_error, "connection lost");
  EXPECT_EQ(c->Snapshot().state, PeerState::kReady);
}

TEST_F(PeerConnectionTest, FailedTransfersAreTheLastErrorWithTheirCode) {
  auto c = Make();
  ASSERT_TRUE(AcquireNow(*c).ok());
  c->RecordError(absl::NotFoundError("no exported region named 'kv'"));
  EXPECT_EQ(c->Snapshot().last_error,
            "NOT_FOUND: no exported region named 'kv'");
}

TEST_F(PeerConnectionTest, NewIncarnationRetiresTheOldChannel) {
  auto c = Make();
  auto first = AcquireNow(*c);
  ASSERT_TRUE(first.ok());
  connector_.remote(kPeer).incarnation = 2;  // the peer restarted
  c->MarkStale(absl::UnavailableError("connection lost"));
  auto second = AcquireNow(*c);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(second->channel, first->channel);
  EXPECT_EQ(second->incarnation, 2u);
  EXPECT_TRUE(connector_.channels(kPeer)[0]->closed());
  EXPECT_FALSE(connector_.channels(kPeer)[1]->closed());
}

TEST_F(PeerConnectionTest, BrokenChannelIsRebuiltWithANewProposal) {
  auto c = Make();
  ASSERT_TRUE(AcquireNow(*c).ok());
  connector_.channels(kPeer)[0]->set_broken(true);  // a QP went to error
  EXPECT_FALSE(c->ReadyLink().has_value());
  auto link = AcquireNow(*c);
  ASSERT_TRUE(link.ok());
  EXPECT_EQ(connector_.hellos(kPeer), 2);
  EXPECT_EQ(connector_.handshakes(kPeer).at(1).propose,
            std::vector<core::TransportKind>{core::TransportKind::kTcp});
  EXPECT_TRUE(connector_.channels(kPeer)[0]->closed());
  EXPECT_EQ(link->channel, connector_.channels(kPeer)[1]);
}

TEST_F(PeerConnectionTest, FailedHandshakeFailsWaitersAndTheNextAcquireRetries) {
  auto c = Make();
  connector_.remote(kPeer).hello_error =
      absl::UnavailableError("peer 10.0.0.2:7471 is unreachable");
  auto link = AcquireNow(*c);
  EXPECT_EQ(link.status().code(), absl::StatusCode::kUnavailable);
  const PeerConnectionSnapshot s = c->Snapshot();
  EXPECT_EQ(s.state, PeerState::kFailed);
  EXPECT_THAT(s.last_error, HasSubstr("unreachable"));
  EXPECT_EQ(s.failed_at, timers_.Now());
  EXPECT_EQ(connector_.forgets(kPeer), 1) << "a fresh gRPC channel next time";
  connector_.remote(kPeer).hello_error = absl::OkStatus();
  EXPECT_TRUE(AcquireNow(*c).ok());
  EXPECT_EQ(c->Snapshot().state, PeerState::kReady);
}

TEST_F(PeerConnectionTest, PeerAnswersKeepTheirCodes) {
  auto c = Make();
  connector_.remote(kPeer).hello_error = absl::InternalError("bug over there");
  EXPECT_EQ(AcquireNow(*c).status().code(), absl::StatusCode::kInternal);
}

TEST_F(PeerConnectionTest, WaitersFailAtTheirOwnDeadlines) {
  auto c = Make();
  connector_.set_hold_hello(true);
  std::optional<absl::StatusOr<Link>> soon, later;
  c->Acquire(timers_.Now() + absl::Seconds(1),
             [&](absl::StatusOr<Link> l) { soon = std::move(l); });
  c->Acquire(timers_.Now() + absl::Seconds(10),
             [&](absl::StatusOr<Link> l) { later = std::move(l); });
  timers_.Advance(absl::Seconds(2));
  ASSERT_TRUE(soon.has_value());
  EXPECT_EQ(soon->status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(soon->status().message(), HasSubstr(kPeer));
  EXPECT_FALSE(later.has_value());
  connector_.ReleaseHellos();
  ASSERT_TRUE(later.has_value());
  EXPECT_TRUE(later->ok());
}

TEST_F(PeerConnectionTest, PastDeadlineFailsWithoutAHandshake) {
  auto c = Make();
  std::optional<absl::StatusOr<Link>> out;
  c->Acquire(timers_.Now(), [&](absl::StatusOr<Link> l) { out = std::move(l); });
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(connector_.hellos(kPeer), 0);
}

TEST_F(PeerConnectionTest, TransportIsChosenFromBothSidesAndTheMode) {
  connector_.set_verbs(true);
  connector_.remote(kPeer).transports = {core::TransportKind::kVerbs,
                                         core::TransportKind::kTcp};
  auto link = AcquireNow(*Make());
  ASSERT_TRUE(link.ok());
  EXPECT_EQ(link->kind, core::TransportKind::kVerbs);

  link = AcquireNow(*Make(core::TransportMode::kTcp));
  ASSERT_TRUE(link.ok());
  EXPECT_EQ(link->kind, core::TransportKind::kTcp);

  connector_.remote(kPeer).transports = {core::TransportKind::kTcp};
  link = AcquireNow(*Make(core::TransportMode::kVerbs));
  EXPECT_EQ(link.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(link.status().message(), HasSubstr("offers no verbs"));
}

TEST_F(PeerConnectionTest, RetireFailsWaitersClosesTheChannelAndIsFinal) {
  auto c = Make();
  ASSERT_TRUE(AcquireNow(*c).ok());
  c->MarkStale(absl::UnavailableError("lost"));
  connector_.set_hold_hello(true);
  std::optional<absl::StatusOr<Link>> waiting;
  c->Acquire(timers_.Now() + absl::Seconds(5),
             [&](absl::StatusOr<Link> l) { waiting = std::move(l); });
  c->Retire(absl::UnavailableError("forgotten"));
  ASSERT_TRUE(waiting.has_value());
  EXPECT_EQ(waiting->status().message(), "forgotten");
  EXPECT_TRUE(connector_.channels(kPeer)[0]->closed());
  connector_.ReleaseHellos();  // a late answer changes nothing
  EXPECT_EQ(c->Snapshot().state, PeerState::kRetired);
  EXPECT_EQ(AcquireNow(*c).status().message(), "forgotten");
}

}  // namespace
}  // namespace rdmad::peer
