// A verbs peer's QP pool sized by its traffic (qp_growth.h,
// verbs_transport.h): a VerbsConnector and a VerbsAcceptor on one device,
// their Peer.Connects delivered in-process, as GrpcPeerConnector's sender
// would. A peer starts with one QP and keeps it for small operations;
// under a batched load its pool doubles to qps_per_peer on both sides, one
// grow at a time, with every operation's bytes in place; a grow that the
// peer answers for another handshake changes nothing and fails no
// operation; a grow for a pool that was replaced, or past the cap on QPs
// per rail, is refused and adds nothing.
#include <thread>

#include "common/status_macros.h"
#include "daemon/transport/verbs/verbs_transport.h"
#include "tests/lab/verbs/verbs_lab_notice_fixture.h"

namespace rdmad::verbs {
namespace {

constexpr uint32_t kQpsPerPeer = 4;
constexpr uint64_t kCallerIncarnation = 11;
constexpr uint64_t kPeerIncarnation = 22;

class PoolGrowthLabTest : public VerbsNoticeLabTest {
 protected:
  void SetUp() override {
    VerbsNoticeLabTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    VerbsTransportOptions options;
    options.device = info_.name;
    options.qps_per_peer = kQpsPerPeer;
    auto fabric = VerbsFabric::Open({info_}, {device_}, options);
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    fabric_ = *std::move(fabric);
    acceptor_ = std::make_unique<VerbsAcceptor>(fabric_, runtime_.get());
    acceptor_->ServeNotices(regions_.get(), &sink_);
    connector_ = std::make_unique<VerbsConnector>(fabric_, runtime_.get());
    // The peer's answer comes from another thread, as gRPC's would.
    connector_->UseSender([this](const std::string& peer,
                                 v1::ConnectRequest request,
                                 transport::ConnectDone done) {
      EXPECT_EQ(peer, "self");
      EXPECT_TRUE(request.grow());
      grows_.fetch_add(1);
      absl::MutexLock lock(&threads_mu_);
      threads_.emplace_back([this, request = std::move(request),
                             done = std::move(done)]() mutable {
        request.set_incarnation(kCallerIncarnation);
        request.set_address(kCaller);
        v1::ConnectResponse response;
        absl::Status s = acceptor_->Accept(request, "127.0.0.1", &response);
        if (!s.ok()) return done(s);
        response.set_incarnation(kPeerIncarnation);
        response.set_generation(request.generation() - answer_older_by_);
        done(std::move(response));
      });
    });
  }

  void TearDown() override {
    channel_.reset();
    {
      absl::MutexLock lock(&threads_mu_);
      for (std::thread& t : threads_) t.join();
      threads_.clear();
    }
    if (pool_channel_ != nullptr) pool_channel_->Close();
    pool_channel_.reset();
    if (acceptor_ != nullptr) acceptor_->Clear();
    grow_qps_.clear();
    grow_cq_.reset();
    VerbsNoticeLabTest::TearDown();
  }

  // The first handshake of generation `generation`, answered by the
  // acceptor: the peer's channel.
  absl::Status Connect(uint64_t generation) {
    v1::ConnectRequest request;
    request.set_address(kCaller);
    request.set_incarnation(kCallerIncarnation);
    request.set_generation(generation);
    auto pending = connector_->Prepare("self", &request);
    if (!pending.ok()) return pending.status();
    v1::ConnectResponse response;
    RDMAD_RETURN_IF_ERROR(acceptor_->Accept(request, "127.0.0.1", &response));
    response.set_incarnation(kPeerIncarnation);
    response.set_generation(generation);
    auto channel = (*pending)->Finish(response);
    if (!channel.ok()) return channel.status();
    pool_channel_ = *std::move(channel);
    return absl::OkStatus();
  }

  // WRITEs `count` x `length` bytes from local_ to inbox_ at the same
  // offsets, as one batch, with a fresh pattern; every one must complete
  // and land.
  void WriteBatchAndCheck(size_t count, uint32_t length, uint32_t seed) {
    FillPattern(reinterpret_cast<uint8_t*>(local_->data()), count * length,
                seed);
    auto key = pool_channel_->KeyFor(*target_);
    ASSERT_TRUE(key.ok()) << key.status();
    auto pending = std::make_shared<Pending>();
    pending->out.resize(count);
    pending->left = count;
    std::vector<transport::RemoteOp> batch(count);
    for (size_t i = 0; i < count; ++i) {
      transport::RemoteOp& op = batch[i];
      op = SameOffsetWrite(local_, target_, *key, i * length, length);
      op.done = [pending, i](absl::Status s) {
        pending->out[i].status = std::move(s);
        if (pending->left.fetch_sub(1) == 1) pending->all.Notify();
      };
    }
    pool_channel_->Post(absl::MakeSpan(batch));
    std::vector<Result> done = Await(*pending);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_TRUE(done[i].status.ok()) << i << ": " << done[i].status;
    }
    ASSERT_EQ(std::memcmp(inbox_->data(), local_->data(),
                          count * length),
              0);
  }

  // A grow of the pool of handshake `generation` carrying `count` copies
  // of one fresh QP's endpoint: what a grow the acceptor refuses before it
  // makes a QP needs. The QP is kept until TearDown.
  v1::ConnectRequest GrowRequest(uint64_t generation, uint32_t count) {
    v1::ConnectRequest request;
    request.set_grow(true);
    request.set_transport(v1::TRANSPORT_VERBS);
    request.set_address(kCaller);
    request.set_incarnation(kCallerIncarnation);
    request.set_generation(generation);
    auto qps = fabric_->CreateQps(0, 1, &grow_cq_);
    EXPECT_TRUE(qps.ok()) << qps.status();
    if (!qps.ok()) return request;
    auto endpoint = (*qps)[0]->LocalEndpoint();
    EXPECT_TRUE(endpoint.ok()) << endpoint.status();
    if (!endpoint.ok()) return request;
    for (uint32_t i = 0; i < count; ++i) {
      ToProto(*endpoint, info_.name, request.add_qps());
    }
    grow_qps_ = *std::move(qps);
    return request;
  }

  size_t InitiatorQps() const {
    return pool_channel_->Describe().connections.size();
  }
  size_t ServedQps() const { return acceptor_->ListServed().size(); }

  std::shared_ptr<VerbsFabric> fabric_;
  std::unique_ptr<VerbsAcceptor> acceptor_;
  std::unique_ptr<VerbsConnector> connector_;
  std::shared_ptr<transport::DataChannel> pool_channel_;
  std::shared_ptr<CompletionQueue> grow_cq_;
  std::vector<std::unique_ptr<QueuePair>> grow_qps_;  // GrowRequest's
  std::atomic<int> grows_{0};
  // Set by a test: the peer answers grows for an older generation.
  uint64_t answer_older_by_ = 0;
  absl::Mutex threads_mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(threads_mu_);
};

TEST_F(PoolGrowthLabTest, APeerWithOneSmallOpKeepsOneQp) {
  ASSERT_TRUE(Connect(1).ok());
  EXPECT_EQ(InitiatorQps(), 1u);
  EXPECT_EQ(ServedQps(), 1u);
  WriteBatchAndCheck(1, 64, 1);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(grows_.load(), 0);
  EXPECT_EQ(InitiatorQps(), 1u);
  EXPECT_EQ(ServedQps(), 1u);
}

TEST_F(PoolGrowthLabTest, ABatchedLoadGrowsThePoolToQpsPerPeer) {
  ASSERT_TRUE(Connect(1).ok());
  // 1,024 WRITEs of 1 KiB: four times what one QP's send queue takes
  // (rxe grants 255 WRs for the 128 asked).
  for (uint32_t round = 0; round < 40 && InitiatorQps() < kQpsPerPeer;
       ++round) {
    WriteBatchAndCheck(1024, 1024, round + 1);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(InitiatorQps(), kQpsPerPeer);
  EXPECT_EQ(ServedQps(), kQpsPerPeer);
  EXPECT_EQ(grows_.load(), 2) << "1 -> 2 -> 4: one grow at a time";
  // The grown pool carries data on its new QPs too.
  WriteBatchAndCheck(1024, 1024, 99);
  if (HasFatalFailure()) return;
  const transport::ChannelInfo info = pool_channel_->Describe();
  size_t used = 0;
  for (const transport::ConnectionInfo& c : info.connections) {
    EXPECT_EQ(c.qp_state, "RTS");
    EXPECT_EQ(c.generation, 1u);
    used += c.posted > 0;
  }
  EXPECT_GT(used, 1u);
  for (const auto& served : acceptor_->ListServed()) {
    EXPECT_EQ(served.connection.qp_state, "RTS");
    EXPECT_EQ(served.connection.generation, 1u);
  }
}

TEST_F(PoolGrowthLabTest, AGrowAnsweredForAnotherHandshakeChangesNothing) {
  answer_older_by_ = 1;
  ASSERT_TRUE(Connect(5).ok());
  for (uint32_t round = 0; round < 6; ++round) {
    WriteBatchAndCheck(1024, 1024, round + 1);
    if (HasFatalFailure()) return;
  }
  EXPECT_GE(grows_.load(), 1);
  EXPECT_EQ(InitiatorQps(), 1u) << "a stale answer's QPs are not taken";
  EXPECT_EQ(pool_channel_->Describe().state, transport::ChannelState::kReady);
}

TEST_F(PoolGrowthLabTest, AGrowForAReplacedPoolIsRefused) {
  ASSERT_TRUE(Connect(1).ok());
  ASSERT_TRUE(Connect(2).ok());
  // What a grow of the first pool would carry, sent after the second
  // handshake replaced it.
  const v1::ConnectRequest request = GrowRequest(1, 1);
  v1::ConnectResponse response;
  const absl::Status s = acceptor_->Accept(request, "127.0.0.1", &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(ServedQps(), 1u) << "the pool in use is left as it was";
}

TEST_F(PoolGrowthLabTest, AGrowPastTheCapIsRefusedAndAddsNoQp) {
  ASSERT_TRUE(Connect(1).ok());
  // A grow of the pool in use by max_qps_per_connect QPs: one too many.
  const uint32_t most = fabric_->options().max_qps_per_connect;
  const v1::ConnectRequest request = GrowRequest(1, most);
  v1::ConnectResponse response;
  const absl::Status s = acceptor_->Accept(request, "127.0.0.1", &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(),
              ::testing::HasSubstr(absl::StrCat("at most ", most, " QPs")));
  EXPECT_EQ(response.qps_size(), 0);
  EXPECT_EQ(ServedQps(), 1u) << "the pool in use is left as it was";
  // The pool still carries data.
  WriteBatchAndCheck(1, 64, 7);
}

}  // namespace
}  // namespace rdmad::verbs
