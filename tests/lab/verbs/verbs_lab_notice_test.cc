// WRITEs with an immediate over verbs: the notice reaches the region's
// owner after the data and before the completion, credits and acks pace
// them, and a refused or undeliverable notice fails its WRITE with the
// reason.
#include "tests/lab/verbs/verbs_lab_notice_fixture.h"

namespace rdmad::verbs {
namespace {

using ::testing::HasSubstr;

TEST_F(VerbsNoticeLabTest, AnImmediateReachesTheOwnerAfterTheDataAndBeforeTheCompletion) {
  StartBoth(notices_);
  if (HasFatalFailure()) return;
  FillPattern(reinterpret_cast<uint8_t*>(local_->data()), 1 << 20, 7);
  // 17 chunks of 4 KiB (the last one short) and the notice, on one QP.
  constexpr uint64_t kLength = 16 * 4096 + 100;
  std::vector<Result> done =
      WriteWithImmediates({{0, 1000, kLength, 0xfeed}}, target_);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(done[0].status.ok()) << done[0].status;
  EXPECT_EQ(done[0].notes_when_done, 1u)
      << "the WRITE completed before its owner was told";
  const std::vector<RecordingSink::Note> notes = sink_.notes();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].region, inbox_->id());
  EXPECT_EQ(notes[0].offset, 1000u);
  EXPECT_EQ(notes[0].length, kLength);
  EXPECT_EQ(notes[0].immediate, 0xfeedu);
  EXPECT_EQ(notes[0].transport, core::TransportKind::kVerbs);
  EXPECT_EQ(notes[0].writer, kCaller)
      << "the writer, as the Connect that made these QPs named it";
  EXPECT_EQ(Compare(reinterpret_cast<uint8_t*>(inbox_->data()) + 1000,
                    reinterpret_cast<uint8_t*>(local_->data()), kLength),
            "");
  EXPECT_EQ(notices_->counts().delivered, 1u);
  EXPECT_EQ(notices_->counts().rejected, 0u);
}

TEST_F(VerbsNoticeLabTest, MoreNoticesThanCreditsWaitForAcksAndAllArrive) {
  StartBoth(notices_);
  if (HasFatalFailure()) return;
  // Three times the credits of the whole pool, in one batch.
  constexpr int kOps = 3 * kPairs * static_cast<int>(kNoticeCredits);
  Ops ops;
  for (int i = 0; i < kOps; ++i) {
    ops.emplace_back(i * 64, i * 64, 64, 1000 + i);
  }
  std::vector<Result> done = WriteWithImmediates(ops, target_);
  for (int i = 0; i < kOps; ++i) {
    EXPECT_TRUE(done[i].status.ok()) << i << ": " << done[i].status;
  }
  std::vector<bool> seen(kOps, false);
  for (const RecordingSink::Note& n : sink_.notes()) {
    ASSERT_GE(n.immediate, 1000u);
    ASSERT_LT(n.immediate, 1000u + kOps);
    const int i = static_cast<int>(n.immediate - 1000);
    EXPECT_FALSE(seen[i]) << "immediate " << n.immediate << " twice";
    seen[i] = true;
    EXPECT_EQ(n.offset, uint64_t(i) * 64);
    EXPECT_EQ(n.length, 64u);
  }
  EXPECT_EQ(sink_.count(), size_t(kOps));
  // The channel is still healthy: the credits all came back.
  EXPECT_FALSE(channel_->NeedsReconnect());
  done = WriteWithImmediates({{0, 0, 8, 1}}, target_);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
}

TEST_F(VerbsNoticeLabTest, ARefusedNoticeFailsTheWriteWithTheReason) {
  StartBoth(notices_);
  if (HasFatalFailure()) return;
  // The NIC accepts the WRITE (inbox's address and rkey), but the notice
  // names another region, whose export that rkey is not: the receiver
  // refuses it, and the ack's reason fails the operation.
  auto other = Allocate("other", 4096, core::RemoteAccess::kReadWrite);
  ASSERT_NE(other, nullptr);
  auto mixed = InfoOf(*inbox_);
  mixed->region_id = other->id();
  std::vector<Result> done = WriteWithImmediates({{0, 0, 64, 5}}, mixed);
  EXPECT_EQ(done[0].status.code(), absl::StatusCode::kPermissionDenied)
      << done[0].status;
  EXPECT_THAT(std::string(done[0].status.message()),
              HasSubstr("does not match the current export"));
  EXPECT_EQ(sink_.count(), 0u) << "a refused notice was announced";
  EXPECT_EQ(notices_->counts().rejected, 1u);
  // Not a QP failure: the channel carries on.
  EXPECT_FALSE(channel_->NeedsReconnect());
  done = WriteWithImmediates({{0, 0, 64, 6}}, target_);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
  EXPECT_EQ(sink_.count(), 1u);
}

TEST_F(VerbsNoticeLabTest, NoticesBeforeTheDaemonServesThemAreRefusedNotLost) {
  StartBoth(std::make_shared<NoticeTarget>());  // no regions, no sink yet
  if (HasFatalFailure()) return;
  std::vector<Result> done = WriteWithImmediates({{0, 0, 64, 5}}, target_);
  EXPECT_EQ(done[0].status.code(), absl::StatusCode::kUnavailable)
      << done[0].status;
  EXPECT_THAT(std::string(done[0].status.message()), HasSubstr("not serving"));
  EXPECT_EQ(sink_.count(), 0u);
}

TEST_F(VerbsNoticeLabTest, AnImmediateToAPeerWithoutReceivesFailsFast) {
  // The peer QP posts no receive, as an rdmad without notices: the notice
  // meets RNR, and rnr_retry is bounded.
  std::vector<std::unique_ptr<QueuePair>> initiators, responders;
  std::shared_ptr<CompletionQueue> icq, rcq;
  MakePairs(1, &initiators, &icq, &responders, &rcq);
  if (HasFatalFailure()) return;
  VerbsChannelOptions options;
  options.loop = runtime_->loop(0);
  options.peer = "old-peer";
  options.local_device = info_.name;
  options.remote_device = info_.name;
  auto channel = VerbsChannel::Create(options, icq, std::move(initiators), {0});
  ASSERT_TRUE(channel.ok()) << channel.status();
  channel_ = *std::move(channel);
  const absl::Time start = absl::Now();
  std::vector<Result> done = WriteWithImmediates({{0, 0, 64, 5}}, target_);
  EXPECT_EQ(done[0].status.code(), absl::StatusCode::kFailedPrecondition)
      << done[0].status;
  EXPECT_THAT(std::string(done[0].status.message()),
              HasSubstr("does not accept notifications"));
  EXPECT_LT(absl::Now() - start, kCompletionTimeout)
      << "failed only at its deadline";
  EXPECT_TRUE(channel_->NeedsReconnect());
  // The data itself went out before the notice.
  EXPECT_EQ(std::memcmp(inbox_->data(), local_->data(), 64), 0);
}

}  // namespace
}  // namespace rdmad::verbs
