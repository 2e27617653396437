// GrpcPeerConnector against an older rdmad, played by an in-process gRPC
// Peer service on loopback: it answers Hello alone (no channel, no error),
// as an rdmad that predates proposals in Hello does, and serves
// Peer.Connect. The data channel must then come from Connect, the fallback
// PeerConnection takes after such a Hello.
#include "daemon/peer/grpc_peer_connector.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/peer_fakes.h"

namespace rdmad::peer {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kOlderPeerIncarnation = 42;
constexpr uint64_t kConnectingIncarnation = 7;
constexpr char kConnectingAddress[] = "127.0.0.1:7999";

// An rdmad that predates proposals in Hello. Records what it was sent.
class OlderPeerService final : public v1::Peer::Service {
 public:
  grpc::Status Hello(grpc::ServerContext*, const v1::HelloRequest* request,
                     v1::HelloResponse* response) override {
    absl::MutexLock lock(&mu_);
    hellos_.push_back(*request);
    response->set_version("older");
    response->set_incarnation(kOlderPeerIncarnation);
    response->add_transports(v1::TRANSPORT_TCP);
    return grpc::Status::OK;
  }
  grpc::Status Connect(grpc::ServerContext*, const v1::ConnectRequest* request,
                       v1::ConnectResponse* response) override {
    absl::MutexLock lock(&mu_);
    connects_.push_back(*request);
    response->set_incarnation(kOlderPeerIncarnation);
    response->set_generation(request->generation() + answer_generation_skew_);
    response->mutable_tcp()->set_host("127.0.0.1");
    response->mutable_tcp()->set_port(7998);
    response->mutable_tcp()->set_connections(request->tcp_connections());
    return grpc::Status::OK;
  }

  // Answers Connects for a handshake `skew` generations later.
  void set_answer_generation_skew(uint64_t skew) {
    absl::MutexLock lock(&mu_);
    answer_generation_skew_ = skew;
  }
  std::vector<v1::HelloRequest> hellos() const {
    absl::MutexLock lock(&mu_);
    return hellos_;
  }
  std::vector<v1::ConnectRequest> connects() const {
    absl::MutexLock lock(&mu_);
    return connects_;
  }

 private:
  mutable absl::Mutex mu_;
  uint64_t answer_generation_skew_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::HelloRequest> hellos_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ConnectRequest> connects_ ABSL_GUARDED_BY(mu_);
};

// What RecordingTcpConnector's half-made channels went through.
struct PendingRecord {
  absl::Mutex mu;
  int prepared ABSL_GUARDED_BY(mu) = 0;
  int finished ABSL_GUARDED_BY(mu) = 0;
  int dropped ABSL_GUARDED_BY(mu) = 0;  // destroyed without an answer
  std::optional<v1::ConnectResponse> answer ABSL_GUARDED_BY(mu);
};

// A TCP Connector whose channels are FakeChannels, recording into a
// PendingRecord the test keeps.
class RecordingTcpConnector final : public transport::Connector {
 public:
  explicit RecordingTcpConnector(std::shared_ptr<PendingRecord> record)
      : record_(std::move(record)) {}

  core::TransportKind kind() const override {
    return core::TransportKind::kTcp;
  }
  bool Usable(std::string*) const override { return true; }
  absl::StatusOr<std::unique_ptr<Pending>> Prepare(
      const std::string&, v1::ConnectRequest* request) override {
    request->set_tcp_connections(2);
    absl::MutexLock lock(&record_->mu);
    ++record_->prepared;
    return std::make_unique<RecordedPending>(record_);
  }

 private:
  class RecordedPending final : public Pending {
   public:
    explicit RecordedPending(std::shared_ptr<PendingRecord> record)
        : record_(std::move(record)) {}
    ~RecordedPending() override {
      absl::MutexLock lock(&record_->mu);
      if (!finished_) ++record_->dropped;
    }
    absl::StatusOr<std::shared_ptr<transport::DataChannel>> Finish(
        const v1::ConnectResponse& response) override {
      finished_ = true;
      absl::MutexLock lock(&record_->mu);
      ++record_->finished;
      record_->answer = response;
      return std::make_shared<testing::FakeChannel>(
          core::TransportKind::kTcp);
    }

   private:
    const std::shared_ptr<PendingRecord> record_;
    bool finished_ = false;
  };

  const std::shared_ptr<PendingRecord> record_;
};

class OlderPeerFallbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    address_ = absl::StrCat("127.0.0.1:", port);

    GrpcPeerConnectorOptions options;
    options.version = "current";
    options.incarnation = kConnectingIncarnation;
    options.offered = {core::TransportKind::kTcp};
    std::vector<std::unique_ptr<transport::Connector>> connectors;
    connectors.push_back(std::make_unique<RecordingTcpConnector>(record_));
    connector_ = std::make_unique<GrpcPeerConnector>(std::move(options),
                                                     std::move(connectors));
    connector_->SetSelfAddress(kConnectingAddress);
  }

  void TearDown() override {
    connector_.reset();  // its calls end before the server goes
    if (server_ != nullptr) server_->Shutdown();
  }

  // Hello proposing a TCP channel, waited for.
  absl::StatusOr<HelloReply> HelloProposingTcp() {
    Handshake handshake;
    handshake.propose = {core::TransportKind::kTcp};
    handshake.deadline = absl::Now() + absl::Seconds(20);
    std::optional<absl::StatusOr<HelloReply>> out;
    absl::Notification done;
    connector_->Hello(address_, std::move(handshake),
                      [&](absl::StatusOr<HelloReply> reply) {
                        out = std::move(reply);
                        done.Notify();
                      });
    done.WaitForNotification();
    return *std::move(out);
  }

  // Connect for a TCP channel, waited for.
  absl::StatusOr<std::shared_ptr<transport::DataChannel>> ConnectTcp(
      uint64_t incarnation) {
    std::optional<absl::StatusOr<std::shared_ptr<transport::DataChannel>>> out;
    absl::Notification done;
    connector_->Connect(
        address_, core::TransportKind::kTcp, incarnation,
        [&](absl::StatusOr<std::shared_ptr<transport::DataChannel>> channel) {
          out = std::move(channel);
          done.Notify();
        });
    done.WaitForNotification();
    return *std::move(out);
  }

  // Whether `n` half-made channels were destroyed unanswered within 10 s
  // (gRPC destroys a call's callback, which holds them, after it ran).
  bool DroppedReaches(int n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    for (;;) {
      {
        absl::MutexLock lock(&record_->mu);
        if (record_->dropped >= n) return true;
      }
      if (absl::Now() >= deadline) return false;
      absl::SleepFor(absl::Milliseconds(1));
    }
  }

  OlderPeerService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  const std::shared_ptr<PendingRecord> record_ =
      std::make_shared<PendingRecord>();
  std::unique_ptr<GrpcPeerConnector> connector_;
};

TEST_F(OlderPeerFallbackTest, AHelloWithoutAChannelStillConnectsThroughConnect) {
  absl::StatusOr<HelloReply> reply = HelloProposingTcp();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->incarnation, kOlderPeerIncarnation);
  // No channel and no error: the peer predates proposals.
  EXPECT_EQ(reply->channel, nullptr);
  EXPECT_EQ(reply->channel_kind, core::TransportKind::kNone);
  EXPECT_TRUE(reply->connect_status.ok()) << reply->connect_status;
  ASSERT_EQ(service_.hellos().size(), 1u);
  ASSERT_EQ(service_.hellos()[0].connect_size(), 1);  // proposed, ignored
  // The proposal's half-made channel is let go with the Hello's call.
  EXPECT_TRUE(DroppedReaches(1));
  {
    absl::MutexLock lock(&record_->mu);
    EXPECT_EQ(record_->prepared, 1);
    EXPECT_EQ(record_->finished, 0);
  }

  absl::StatusOr<std::shared_ptr<transport::DataChannel>> channel =
      ConnectTcp(reply->incarnation);
  ASSERT_TRUE(channel.ok()) << channel.status();
  ASSERT_NE(*channel, nullptr);
  EXPECT_EQ((*channel)->kind(), core::TransportKind::kTcp);

  // The Connect named this daemon and the run of the peer Hello found, and
  // carried what the transport prepared, for a newer handshake.
  ASSERT_EQ(service_.connects().size(), 1u);
  const v1::ConnectRequest sent = service_.connects()[0];
  EXPECT_EQ(sent.transport(), v1::TRANSPORT_TCP);
  EXPECT_EQ(sent.target_incarnation(), kOlderPeerIncarnation);
  EXPECT_EQ(sent.incarnation(), kConnectingIncarnation);
  EXPECT_EQ(sent.address(), kConnectingAddress);
  EXPECT_EQ(sent.tcp_connections(), 2u);
  EXPECT_GT(sent.generation(), service_.hellos()[0].connect(0).generation());
  absl::MutexLock lock(&record_->mu);
  EXPECT_EQ(record_->prepared, 2);
  EXPECT_EQ(record_->finished, 1);
  ASSERT_TRUE(record_->answer.has_value());
  EXPECT_EQ(record_->answer->generation(), sent.generation());
  EXPECT_EQ(record_->answer->tcp().port(), 7998u);
}

TEST_F(OlderPeerFallbackTest, AConnectAnsweredForAnotherHandshakeIsRefused) {
  absl::StatusOr<HelloReply> reply = HelloProposingTcp();
  ASSERT_TRUE(reply.ok()) << reply.status();
  service_.set_answer_generation_skew(1);
  absl::StatusOr<std::shared_ptr<transport::DataChannel>> channel =
      ConnectTcp(reply->incarnation);
  EXPECT_EQ(channel.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(channel.status().message(), HasSubstr(address_));
  EXPECT_TRUE(DroppedReaches(2));  // no channel from a stale answer
  absl::MutexLock lock(&record_->mu);
  EXPECT_EQ(record_->finished, 0);
}

// Nothing a call holds is left for gRPC's thread to destroy once Shutdown
// has returned: were the last reference to a channel dropped there, gRPC
// could take its callback queue down under the thread polling it.
TEST_F(OlderPeerFallbackTest, NothingACallHoldsOutlivesShutdown) {
  // Destroyed slowly, so that a Shutdown that does not wait for it returns
  // first.
  struct SlowToDestroy {
    std::shared_ptr<std::atomic<bool>> gone;
    ~SlowToDestroy() {
      absl::SleepFor(absl::Milliseconds(100));
      gone->store(true);
    }
  };
  auto held = std::make_shared<SlowToDestroy>();
  held->gone = std::make_shared<std::atomic<bool>>(false);
  const std::shared_ptr<std::atomic<bool>> gone = held->gone;
  absl::Notification answered;
  Handshake handshake;
  handshake.deadline = absl::Now() + absl::Seconds(20);
  connector_->Hello(address_, std::move(handshake),
                    [held = std::move(held),
                     &answered](absl::StatusOr<HelloReply> reply) {
                      EXPECT_TRUE(reply.ok()) << reply.status();
                      answered.Notify();
                    });
  answered.WaitForNotification();
  connector_->Shutdown();
  EXPECT_TRUE(gone->load());
}

}  // namespace
}  // namespace rdmad::peer
