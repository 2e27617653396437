// The verbs data channel (VerbsChannel) on a real device: batches go out
// as chains and land, READs in smaller work requests, and a failed QP,
// a wrong rkey or a deadline make the channel ask for a reconnect.
#include "tests/lab/verbs/verbs_lab_fixture.h"

namespace rdmad::verbs {
namespace {

using ::testing::HasSubstr;

class VerbsChannelLabTest : public LoopbackTest {
 protected:
  void SetUp() override {
    LoopbackTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto runtime = runtime::IoRuntime::Start({.threads = 1});
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    runtime_ = *std::move(runtime);
    regions_ = std::make_unique<core::RegionTable>(registrar_.get(),
                                                   core::RegionLimits{});
    core::AllocateOptions o;
    o.size = 1 << 20;
    o.name = "local";
    o.daemon_owned = true;
    auto region = regions_->Allocate(core::Caller{1, 0, 0, 1}, o);
    ASSERT_TRUE(region.ok()) << region.status();
    local_ = *region;
    remote_ = MakeBuffer(1 << 20, core::RemoteAccess::kReadWrite);
    target_ = std::make_shared<core::RemoteRegionInfo>();
    target_->peer = "self";
    target_->name = "remote";
    target_->length = 1 << 20;
    target_->access = core::RemoteAccess::kReadWrite;
    target_->addr = remote_.addr(0);
    target_->rkeys.push_back({info_.name, 0, remote_.rkey()});
    std::vector<std::unique_ptr<QueuePair>> qps;
    qps.push_back(std::move(a_));
    channel_ = MakeChannel(cq_a_, std::move(qps));
  }

  // A channel to "self" over `qps` (connected, on `cq`), chains of 16.
  std::unique_ptr<VerbsChannel> MakeChannel(
      std::shared_ptr<CompletionQueue> cq,
      std::vector<std::unique_ptr<QueuePair>> qps) {
    VerbsChannelOptions options;
    options.loop = runtime_->loop(0);
    options.peer = "self";
    options.local_device = info_.name;
    options.remote_device = info_.name;
    options.max_chain = 16;
    std::vector<uint32_t> remote_qpns(qps.size(), 0);
    auto channel = VerbsChannel::Create(options, std::move(cq), std::move(qps),
                                        std::move(remote_qpns));
    EXPECT_TRUE(channel.ok()) << channel.status();
    return channel.ok() ? *std::move(channel) : nullptr;
  }

  void TearDown() override {
    channel_.reset();
    if (runtime_) runtime_->Stop();
  }

  // `n` WRITEs of `len` bytes at local and remote offset i * len, without
  // their callbacks.
  std::vector<transport::RemoteOp> WriteOps(int n, uint32_t len,
                                            transport::RemoteKey key) {
    std::vector<transport::RemoteOp> ops(n);
    for (int i = 0; i < n; ++i) {
      ops[i] = SameOffsetWrite(local_, target_, key, i * len, len);
    }
    return ops;
  }

  // WriteOps posted as one batch; returns their statuses.
  std::vector<absl::Status> WriteBatch(int n, uint32_t len,
                                       transport::RemoteKey key) {
    std::vector<absl::Status> out(n, absl::UnknownError("not done"));
    absl::Notification all;
    auto left = std::make_shared<std::atomic<int>>(n);
    std::vector<transport::RemoteOp> ops = WriteOps(n, len, key);
    for (int i = 0; i < n; ++i) {
      ops[i].done = [&out, &all, left, i](absl::Status s) {
        out[i] = std::move(s);
        if (left->fetch_sub(1) == 1) all.Notify();
      };
    }
    channel_->Post(absl::MakeSpan(ops));
    EXPECT_TRUE(all.WaitForNotificationWithTimeout(kCompletionTimeout));
    return out;
  }

  // One operation of `len` bytes between local and remote offsets.
  absl::Status PostOne(core::OpType kind, uint64_t local_offset,
                       uint64_t remote_offset, uint64_t len,
                       transport::RemoteKey key) {
    auto result = std::make_shared<absl::Status>(absl::UnknownError("not done"));
    auto done = std::make_shared<absl::Notification>();
    std::vector<transport::RemoteOp> ops(1);
    transport::RemoteOp& op = ops[0];
    op.op = kind;
    op.local = local_;
    op.local_addr = local_->data() + local_offset;
    op.length = len;
    op.remote = target_;
    op.key = key;
    op.remote_offset = remote_offset;
    op.deadline = absl::Now() + kCompletionTimeout;
    op.done = [result, done](absl::Status s) {
      *result = std::move(s);
      done->Notify();
    };
    channel_->Post(absl::MakeSpan(ops));
    EXPECT_TRUE(done->WaitForNotificationWithTimeout(kCompletionTimeout));
    return *result;
  }

  std::unique_ptr<runtime::IoRuntime> runtime_;
  std::unique_ptr<core::RegionTable> regions_;
  std::shared_ptr<core::Region> local_;
  Buffer remote_;
  std::shared_ptr<core::RemoteRegionInfo> target_;
  std::unique_ptr<VerbsChannel> channel_;
};

TEST_F(VerbsChannelLabTest, ABatchGoesOutAsChainsAndLands) {
  for (int i = 0; i < 1 << 20; ++i) local_->data()[i] = static_cast<char>(i * 13);
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->base, remote_.addr(0));
  constexpr int kOps = 64;
  constexpr uint32_t kLen = 200;
  for (const absl::Status& s : WriteBatch(kOps, kLen, *key)) {
    EXPECT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(std::memcmp(remote_.data(), local_->data(), kOps * kLen), 0);
  const transport::ChannelInfo info = channel_->Describe();
  ASSERT_EQ(info.connections.size(), 1u);
  EXPECT_EQ(info.connections[0].posted, uint64_t{kOps});
  // Chains of up to 16: 4 ibv_post_send calls for the batch (a few more if
  // completions freed slots while it was being posted).
  EXPECT_LE(info.connections[0].post_calls, uint64_t{kOps / 8});
  EXPECT_EQ(info.connections[0].qp_state, "RTS");
  EXPECT_EQ(info.state, transport::ChannelState::kReady);
}

// With several QPs, a batch of small operations still goes as one chain
// on one QP (each ibv_post_send is a system call), while large ones are
// spread over the QPs.
TEST_F(VerbsChannelLabTest, SmallOpsGoAsOneChainLargeOnesAreSpread) {
  auto cq = CompletionQueue::Create(device_, 256);
  ASSERT_TRUE(cq.ok()) << cq.status();
  std::vector<std::unique_ptr<QueuePair>> qps;
  std::vector<std::unique_ptr<QueuePair>> peers;
  for (int i = 0; i < 2; ++i) {
    auto qp = QueuePair::Create(*cq, Config());
    ASSERT_TRUE(qp.ok()) << qp.status();
    auto peer = QueuePair::Create(cq_b_, Config());
    ASSERT_TRUE(peer.ok()) << peer.status();
    auto ea = (*qp)->LocalEndpoint();
    auto eb = (*peer)->LocalEndpoint();
    ASSERT_TRUE(ea.ok() && eb.ok());
    ASSERT_TRUE((*qp)->Connect(*eb).ok());
    ASSERT_TRUE((*peer)->Connect(*ea).ok());
    qps.push_back(*std::move(qp));
    peers.push_back(*std::move(peer));
  }
  channel_ = MakeChannel(*cq, std::move(qps));
  ASSERT_NE(channel_, nullptr);
  for (int i = 0; i < 1 << 20; ++i) local_->data()[i] = static_cast<char>(i * 3);
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok()) << key.status();

  constexpr int kSmall = 16;
  for (const absl::Status& s : WriteBatch(kSmall, 64, *key)) {
    EXPECT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(std::memcmp(remote_.data(), local_->data(), kSmall * 64), 0);
  transport::ChannelInfo info = channel_->Describe();
  ASSERT_EQ(info.connections.size(), 2u);
  EXPECT_EQ(info.connections[0].posted + info.connections[1].posted,
            uint64_t{kSmall});
  EXPECT_EQ(info.connections[0].post_calls + info.connections[1].post_calls,
            1u)
      << "16 WRITEs of 64 bytes: one chain on one QP";

  constexpr uint32_t kLarge = 512 << 10;
  for (const absl::Status& s : WriteBatch(2, kLarge, *key)) {
    EXPECT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(std::memcmp(remote_.data(), local_->data(), 2 * kLarge), 0);
  const transport::ChannelInfo after = channel_->Describe();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(after.connections[i].post_calls - info.connections[i].post_calls,
              1u)
        << "two WRITEs of 512 KiB: one on each QP (QP " << i << ")";
  }
  channel_.reset();  // before its QPs' peers
}

// A READ goes out in work requests of read_chunk_bytes (64 KiB by
// default), a WRITE in chunk_bytes (1 MiB): a READ's response is a burst
// from the peer that a lossy link makes costly to lose.
TEST_F(VerbsChannelLabTest, ReadsGoOutInSmallerWorkRequestsThanWrites) {
  constexpr uint64_t kHalf = 512 << 10;
  for (uint64_t i = 0; i < kHalf; ++i) local_->data()[i] = static_cast<char>(i * 7 + 1);
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok()) << key.status();
  ASSERT_TRUE(PostOne(core::OpType::kWrite, 0, 0, kHalf, *key).ok());
  EXPECT_EQ(channel_->Describe().connections[0].posted, 1u)
      << "512 KiB WRITE: one work request";
  ASSERT_TRUE(PostOne(core::OpType::kRead, kHalf, 0, kHalf, *key).ok());
  EXPECT_EQ(channel_->Describe().connections[0].posted,
            1u + kHalf / kDefaultReadChunkBytes)
      << "512 KiB READ: one work request per 64 KiB";
  EXPECT_EQ(std::memcmp(local_->data() + kHalf, local_->data(), kHalf), 0)
      << "what was read back differs from what was written";
}

TEST_F(VerbsChannelLabTest, ARegionWithoutAnRkeyForThePeersDeviceIsRefused) {
  core::RemoteRegionInfo other = *target_;
  other.rkeys = {{"some-other-device", 0, 7}};
  auto key = channel_->KeyFor(other);
  EXPECT_EQ(key.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(key.status().message(), ::testing::HasSubstr("not exported over verbs"));
}

TEST_F(VerbsChannelLabTest, AWrongRkeyFailsTheOpAndTheChannelNeedsReconnect) {
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok());
  transport::RemoteKey wrong = *key;
  wrong.key += 1;
  std::vector<absl::Status> out = WriteBatch(1, 64, wrong);
  EXPECT_EQ(out[0].code(), absl::StatusCode::kPermissionDenied) << out[0];
  EXPECT_TRUE(channel_->NeedsReconnect());
  out = WriteBatch(1, 64, *key);  // refused until rebuilt
  EXPECT_EQ(out[0].code(), absl::StatusCode::kUnavailable) << out[0];
}

// One chain, mostly unsignalled, whose fourth WR the peer refuses: the
// three before it completed (RC executes a QP's WRs in order) and are
// retired as done by the failed WR's completion; the refused one fails
// with the verbs status; the ones behind it are flushed and fail. Every
// operation finishes exactly once.
TEST_F(VerbsChannelLabTest, AFailedWrFailsItsOpAndTheChainBehindItOnce) {
  for (int i = 0; i < 4096; ++i) {
    local_->data()[i] = static_cast<char>(i * 5 + 3);
  }
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok()) << key.status();
  constexpr int kOps = 8;
  constexpr int kRefused = 3;
  constexpr uint32_t kLen = 64;
  struct Result {
    absl::Status status = absl::UnknownError("not done");
    std::atomic<int> calls{0};
  };
  auto results = std::make_shared<std::vector<Result>>(kOps);
  auto left = std::make_shared<std::atomic<int>>(kOps);
  auto all = std::make_shared<absl::Notification>();
  std::vector<transport::RemoteOp> ops = WriteOps(kOps, kLen, *key);
  ops[kRefused].key.key += 1;
  for (int i = 0; i < kOps; ++i) {
    ops[i].done = [results, left, all, i](absl::Status s) {
      Result& r = (*results)[i];
      if (r.calls.fetch_add(1) == 0) r.status = std::move(s);
      if (left->fetch_sub(1) == 1) all->Notify();
    };
  }
  channel_->Post(absl::MakeSpan(ops));
  ASSERT_TRUE(all->WaitForNotificationWithTimeout(kCompletionTimeout));
  // A second completion of any of them would come from a later drain or
  // the flush grace timer: give both time to run.
  absl::SleepFor(VerbsChannelOptions().flush_grace + absl::Milliseconds(500));
  for (int i = 0; i < kOps; ++i) {
    SCOPED_TRACE(i);
    const Result& r = (*results)[i];
    EXPECT_EQ(r.calls.load(), 1);
    if (i < kRefused) {
      EXPECT_TRUE(r.status.ok()) << r.status;
    } else if (i == kRefused) {
      EXPECT_EQ(r.status.code(), absl::StatusCode::kPermissionDenied)
          << r.status;
      EXPECT_THAT(std::string(r.status.message()),
                  HasSubstr("work completion failed"));
    } else {
      EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
    }
  }
  EXPECT_EQ(std::memcmp(remote_.data(), local_->data(), kRefused * kLen), 0)
      << "the WRITEs before the refused one did not land";
  EXPECT_TRUE(channel_->NeedsReconnect());
  EXPECT_EQ(channel_->Describe().connections[0].post_calls, 1u)
      << "the batch went out as one chain";
}

TEST_F(VerbsChannelLabTest, AForcedQpErrorMakesTheChannelAskForAReconnect) {
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok());
  ASSERT_TRUE(WriteBatch(1, 64, *key)[0].ok());
  channel_->ForceError(0);
  for (int i = 0; i < 100 && !channel_->NeedsReconnect(); ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(channel_->NeedsReconnect());
  EXPECT_EQ(channel_->Describe().state, transport::ChannelState::kError);
  std::vector<absl::Status> out = WriteBatch(1, 64, *key);
  EXPECT_EQ(out[0].code(), absl::StatusCode::kUnavailable) << out[0];
  EXPECT_THAT(std::string(out[0].message()), ::testing::HasSubstr("rebuilt"));
}

// An operation whose peer stops answering fails at its deadline, and only
// after its QP went to the error state (the NIC no longer touches its
// memory). The earlier deadline was posted after a later one: the
// channel's one deadline timer must be re-armed for it, or the operation
// would fail only when the QP gives up retrying (UNAVAILABLE, ~7 s).
TEST_F(VerbsChannelLabTest, AnOperationPastItsDeadlineFailsAfterItsQpIsFlushed) {
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok());
  ASSERT_TRUE(WriteBatch(1, 64, *key)[0].ok()) << "the pair works";
  b_.reset();  // the responder is gone: WRITEs are retried, never ACKed
  struct Result {
    absl::Status status = absl::UnknownError("not done");
    absl::Notification done;
  };
  std::vector<std::shared_ptr<Result>> results = {std::make_shared<Result>(),
                                                  std::make_shared<Result>()};
  std::vector<transport::RemoteOp> ops(2);
  for (size_t i = 0; i < ops.size(); ++i) {
    transport::RemoteOp& op = ops[i];
    op.op = core::OpType::kWrite;
    op.local = local_;
    op.local_addr = local_->data() + i * 64;
    op.length = 64;
    op.remote = target_;
    op.key = *key;
    op.remote_offset = i * 64;
    op.done = [result = results[i]](absl::Status s) {
      result->status = std::move(s);
      result->done.Notify();
    };
  }
  ops[0].deadline = absl::Now() + kCompletionTimeout;
  ops[1].deadline = absl::Now() + absl::Milliseconds(300);
  channel_->Post(absl::MakeSpan(ops));
  ASSERT_TRUE(results[1]->done.WaitForNotificationWithTimeout(kCompletionTimeout));
  EXPECT_EQ(results[1]->status.code(), absl::StatusCode::kDeadlineExceeded)
      << results[1]->status;
  EXPECT_THAT(std::string(results[1]->status.message()),
              ::testing::HasSubstr("did not complete within its deadline"));
  EXPECT_TRUE(channel_->NeedsReconnect()) << "its QP went to the error state";
  // The other WRITE was on the same QP: flushed, it fails too, long before
  // its own deadline.
  ASSERT_TRUE(results[0]->done.WaitForNotificationWithTimeout(kCompletionTimeout));
  EXPECT_EQ(results[0]->status.code(), absl::StatusCode::kUnavailable)
      << results[0]->status;
}

TEST_F(VerbsChannelLabTest, CloseFailsLaterPostsAndStopsTheChannel) {
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok());
  channel_->Close();
  std::vector<absl::Status> out = WriteBatch(2, 64, *key);
  for (const absl::Status& s : out) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  }
  EXPECT_EQ(channel_->Describe().state, transport::ChannelState::kClosed);
}

}  // namespace
}  // namespace rdmad::verbs
