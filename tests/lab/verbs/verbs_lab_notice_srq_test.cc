// Notices received from the device's shared receive queue (notice_srq.h):
// every pool's notices arrive through it, and the receives posted stay the
// queue's depth however many pools it serves, and as pools go away, also
// when they go in the middle of a stream of notices (their QPs retired:
// moved to the error state, destroyed after their last WQE). rxe on
// Debian's 6.1 kernel reported no IBV_EVENT_QP_LAST_WQE_REACHED within 2 s
// for such a QP in the lab, so here they go at kLastWqeWait.
#include "tests/lab/verbs/verbs_lab_notice_fixture.h"

namespace rdmad::verbs {
namespace {

TEST_F(VerbsNoticeLabTest, SharedReceivesServeEveryPoolAndDoNotGrowWithThem) {
  // Fewer receives than the pools' credits together (8 x 2 QPs x 16).
  constexpr uint32_t kDepth = 64;
  constexpr int kPools = 8;
  auto created = NoticeSharedReceives::Create(device_, kDepth);
  ASSERT_TRUE(created.ok()) << created.status();
  std::shared_ptr<NoticeSharedReceives> shared = *std::move(created);
  EXPECT_EQ(shared->posted(), kDepth);
  std::vector<std::unique_ptr<NoticeReceiver>> receivers;
  std::vector<std::unique_ptr<VerbsChannel>> channels;
  size_t sent = 0;
  for (int p = 0; p < kPools; ++p) {
    StartBoth(notices_, shared);
    if (HasFatalFailure()) return;
    // Twice the pool's credits in one batch, so receives are taken and
    // given back while more notices arrive.
    constexpr int kOps = 2 * kPairs * static_cast<int>(kNoticeCredits);
    Ops ops;
    for (int i = 0; i < kOps; ++i) {
      ops.emplace_back(i * 64, i * 64, 64, 100000 * (p + 1) + i);
    }
    std::vector<Result> done = WriteWithImmediates(ops, target_);
    for (int i = 0; i < kOps; ++i) {
      ASSERT_TRUE(done[i].status.ok()) << p << "/" << i << ": " << done[i].status;
    }
    sent += kOps;
    EXPECT_TRUE(Eventually([&] { return shared->posted() == kDepth; }))
        << "after pool " << p << ": " << shared->posted() << " posted";
    receivers.push_back(std::move(receiver_));
    channels.push_back(std::move(channel_));
  }
  EXPECT_EQ(sink_.count(), sent);
  EXPECT_EQ(notices_->counts().delivered, sent);
  EXPECT_EQ(shared->reposts(), sent) << "every notice came through the queue";
  // The pools go; the queue keeps its receives for the next ones.
  channels.clear();
  receivers.clear();
  EXPECT_TRUE(Eventually([&] { return shared->posted() == kDepth; }))
      << shared->posted();
  StartBoth(notices_, shared);
  if (HasFatalFailure()) return;
  std::vector<Result> done = WriteWithImmediates({{0, 0, 8, 7}}, target_);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
  EXPECT_EQ(shared->reposts(), sent + 1);
}

TEST_F(VerbsNoticeLabTest, PoolsEvictedWhileNoticesFlowGiveEveryReceiveBack) {
  auto monitor = PortMonitor::Start({device_});
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  monitor_ = *std::move(monitor);
  constexpr uint32_t kDepth = 64;
  auto created = NoticeSharedReceives::Create(device_, kDepth);
  ASSERT_TRUE(created.ok()) << created.status();
  std::shared_ptr<NoticeSharedReceives> shared = *std::move(created);
  for (int round = 0; round < 4; ++round) {
    StartBoth(notices_, shared);
    if (HasFatalFailure()) return;
    constexpr int kOps = 2 * kPairs * static_cast<int>(kNoticeCredits);
    Ops ops;
    for (int i = 0; i < kOps; ++i) {
      ops.emplace_back(i * 64, i * 64, 64, 1000 * (round + 1) + i);
    }
    std::shared_ptr<Pending> pending = PostWithImmediates(ops, target_);
    // Evicted at a different moment of the stream each round.
    absl::SleepFor(absl::Milliseconds(3 * round));
    const absl::Time evicted = absl::Now();
    receiver_.reset();
    // Every operation ends (done or failed), none hangs.
    Await(*pending);
    channel_.reset();
    EXPECT_TRUE(Eventually([&] { return shared->posted() == kDepth; }))
        << "round " << round << ": " << shared->posted() << " of " << kDepth
        << " receives posted";
    EXPECT_LT(absl::Now() - evicted, kLastWqeWait + kCompletionTimeout);
  }
}

}  // namespace
}  // namespace rdmad::verbs
