// Notices from a peer that cannot be trusted: forged, replayed after a
// revocation, from a peer the access list does not admit, through a kept
// rkey after its revocation, or with acks skipped or invented; none
// notifies and the channel survives.
#include "tests/lab/verbs/verbs_lab_notice_fixture.h"

namespace rdmad::verbs {
namespace {

using ::testing::HasSubstr;

TEST_F(VerbsNoticeLabTest, AForgedNoticeIsDroppedAndNeverNotifies) {
  StartRawPeer();
  if (HasFatalFailure()) return;
  auto ro = Allocate("ro", 4096, core::RemoteAccess::kRead);
  ASSERT_NE(ro, nullptr);
  Notice good;
  good.region_id = inbox_->id();
  good.rkey = target_->rkeys[0].rkey;
  good.offset = 128;
  good.length = 64;
  good.immediate = 77;

  // Not notices at all: dropped without an answer.
  std::array<uint8_t, kNoticeBytes> bad_magic = EncodeNotice(good);
  bad_magic[0] ^= 0xff;
  RawSend(bad_magic.data(), bad_magic.size());
  RawSend(bad_magic.data(), 10);
  std::array<uint8_t, kNoticeBytes> future = EncodeNotice(good);
  future[4] = 9;  // version 9
  RawSend(future.data(), future.size());
  // Notices that fail the check: refused in the ack, never announced.
  Notice n = good;
  n.tag = 1;
  n.rkey = good.rkey + 1;
  RawSendNotice(n);
  n = good;
  n.tag = 2;
  n.offset = inbox_->size() - 8;  // runs past the end
  RawSendNotice(n);
  n = good;
  n.tag = 3;
  n.region_id = 987654;
  RawSendNotice(n);
  n = good;
  n.tag = 4;
  n.region_id = ro->id();
  n.rkey = ro->exported().keys[0].rkey;
  RawSendNotice(n);
  // After all that, a good one still gets through.
  n = good;
  n.tag = 5;
  RawSendNotice(n);

  std::vector<NoticeAck> acks = RawAcks(5);
  ASSERT_EQ(acks.size(), 5u) << "acks of the five decodable notices";
  const NoticeResult want[] = {NoticeResult::kKeyMismatch,
                               NoticeResult::kOutOfRange,
                               NoticeResult::kNotExported,
                               NoticeResult::kReadOnly,
                               NoticeResult::kDelivered};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(acks[i].tag, i + 1);
    EXPECT_EQ(acks[i].result, want[i]) << NoticeResultName(acks[i].result);
  }
  const std::vector<RecordingSink::Note> notes = sink_.notes();
  ASSERT_EQ(notes.size(), 1u) << "only the good notice is announced";
  EXPECT_EQ(notes[0].region, inbox_->id());
  EXPECT_EQ(notes[0].offset, 128u);
  EXPECT_EQ(notes[0].immediate, 77u);
  NoticeCounts counts = notices_->counts();
  EXPECT_EQ(counts.malformed, 3u);
  EXPECT_EQ(counts.rejected, 4u);
  EXPECT_EQ(counts.delivered, 1u);

  // A SEND longer than a receive slot breaks that receive (and the QP);
  // the receiver counts it and carries on.
  std::vector<uint8_t> big(200, 0xab);
  auto mr = MemoryRegion::Register(device_, big.data(), big.size(),
                                   MrAccessFlags(core::RemoteAccess::kNone));
  ASSERT_TRUE(mr.ok()) << mr.status();
  RdmaOp op;
  op.opcode = RdmaOp::Opcode::kSend;
  op.wr_id = 999;
  op.local_addr = big.data();
  op.length = static_cast<uint32_t>(big.size());
  op.lkey = (*mr)->lkey();
  ASSERT_TRUE(raw_qp_->Post(absl::MakeConstSpan(&op, 1)).ok());
  EXPECT_TRUE(Eventually([&] { return notices_->counts().malformed == 4; }))
      << notices_->counts().malformed;
  EXPECT_EQ(sink_.count(), 1u);
}

// A notice replayed after the export it was sent under was revoked is
// refused and never announced: after unexport (not exported), after a
// re-export and after a chmod that takes rights away (the old rkey is not
// the current export's), after free (no such region). Replayed while its
// export stands, it is announced again: only the holder of the region's
// rkey with write access could send it, and it could as well write again.
TEST_F(VerbsNoticeLabTest, ReplayedNoticesAfterARevocationAreRefused) {
  StartRawPeer();
  if (HasFatalFailure()) return;
  auto region = Allocate("replayed", 4096, core::RemoteAccess::kReadWrite);
  ASSERT_NE(region, nullptr);
  const core::Caller owner{1, 0, 0, 1};
  const core::RegionKey key{region->id(), ""};
  uint64_t tag = 0;
  // Sends `n` once more under a new tag; returns what the ack said.
  auto replay = [&](Notice n) {
    n.tag = ++tag;
    RawSendNotice(n);
    std::vector<NoticeAck> acks = RawAcks(1);
    EXPECT_EQ(acks.size(), 1u);
    if (acks.empty()) return NoticeResult::kNotServed;
    EXPECT_EQ(acks[0].tag, tag);
    return acks[0].result;
  };

  const Notice first = NoticeFor(*region, 0, 64, 0);
  EXPECT_EQ(replay(first), NoticeResult::kDelivered);
  EXPECT_EQ(replay(first), NoticeResult::kDelivered) << "export unchanged";
  ASSERT_TRUE(regions_->SetPermissions(owner, key, 0400, std::nullopt).ok());
  EXPECT_EQ(replay(first), NoticeResult::kKeyMismatch) << "after chmod";

  const Notice second = NoticeFor(*region, 64, 64, 0);  // the new rkey
  EXPECT_EQ(replay(second), NoticeResult::kDelivered);
  ASSERT_TRUE(regions_->Export(owner, key, core::RemoteAccess::kNone).ok());
  EXPECT_EQ(replay(second), NoticeResult::kNotExported) << "after unexport";
  ASSERT_TRUE(
      regions_->Export(owner, key, core::RemoteAccess::kReadWrite).ok());
  EXPECT_EQ(replay(second), NoticeResult::kKeyMismatch) << "after re-export";

  const Notice third = NoticeFor(*region, 128, 64, 0);
  EXPECT_EQ(replay(third), NoticeResult::kDelivered);
  ASSERT_TRUE(regions_->Free(owner, key).ok());
  EXPECT_EQ(replay(third), NoticeResult::kNotExported) << "after free";

  EXPECT_EQ(sink_.count(), 4u) << "only the notices under a live export";
  EXPECT_EQ(notices_->counts().rejected, 4u);
}

// A peer the export's access list does not admit (by the address its QP
// pool was made for) cannot tell the owner of anything, whatever rkey it
// holds; once the list admits it, it can.
TEST_F(VerbsNoticeLabTest, ANoticeFromAPeerTheAccessListDoesNotAdmitIsRefused) {
  StartRawPeer("192.0.2.200");
  if (HasFatalFailure()) return;
  const core::Caller owner{1, 0, 0, 1};
  const core::RegionKey key{inbox_->id(), ""};
  auto only = [](const std::string& who) {
    auto list = core::ExportAccessList::Parse({{who, std::nullopt}});
    EXPECT_TRUE(list.ok()) << list.status();
    return std::make_shared<core::ExportAccessList>(*list);
  };
  ASSERT_TRUE(regions_
                  ->Export(owner, key, core::RemoteAccess::kReadWrite,
                           only("192.0.2.1"))
                  .ok());
  RawSendNotice(NoticeFor(*inbox_, 0, 64, 1));
  std::vector<NoticeAck> acks = RawAcks(1);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].result, NoticeResult::kNotAdmitted)
      << NoticeResultName(acks[0].result);
  EXPECT_EQ(sink_.count(), 0u);

  ASSERT_TRUE(regions_
                  ->Export(owner, key, core::RemoteAccess::kReadWrite,
                           only("192.0.2.200"))
                  .ok());
  RawSendNotice(NoticeFor(*inbox_, 0, 64, 2));
  acks = RawAcks(1);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].result, NoticeResult::kDelivered)
      << NoticeResultName(acks[0].result);
  EXPECT_EQ(sink_.count(), 1u);
}

// A peer that kept the rkey of an export keeps writing with it, one WRITE
// at a time, while the owner revokes the export (unexport, re-export, a
// chmod that takes rights away, free). Once the revoking call returns,
// nothing more lands: the region's bytes then are its bytes for good, and
// the peer's next WRITE fails with a remote access error.
TEST_F(VerbsNoticeLabTest, AKeptRkeyWritesNothingOnceItsRevocationReturns) {
  const core::Caller owner{1, 0, 0, 1};
  constexpr size_t kSlot = 4096;
  constexpr size_t kSlots = 8;
  const struct {
    const char* name;
    std::function<absl::Status(const core::RegionKey&)> revoke;
  } cases[] = {
      {"unexport",
       [&](const core::RegionKey& key) {
         return regions_->Export(owner, key, core::RemoteAccess::kNone)
             .status();
       }},
      {"re-export",
       [&](const core::RegionKey& key) {
         return regions_->Export(owner, key, core::RemoteAccess::kReadWrite)
             .status();
       }},
      {"chmod",
       [&](const core::RegionKey& key) {
         return regions_->SetPermissions(owner, key, 0400, std::nullopt)
             .status();
       }},
      {"free",
       [&](const core::RegionKey& key) { return regions_->Free(owner, key); }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto target = Allocate(absl::StrCat("kept-", c.name), kSlot * kSlots,
                           core::RemoteAccess::kReadWrite);
    ASSERT_NE(target, nullptr);
    const uint32_t rkey = target->exported().keys[0].rkey;
    const uint64_t base = reinterpret_cast<uintptr_t>(target->data());
    std::vector<std::unique_ptr<QueuePair>> initiators, responders;
    std::shared_ptr<CompletionQueue> icq, rcq;
    MakePairs(1, &initiators, &icq, &responders, &rcq);
    if (HasFatalFailure()) return;
    QueuePair& peer = *initiators[0];
    std::vector<uint8_t> source(kSlot);
    auto mr = MemoryRegion::Register(device_, source.data(), source.size(),
                                     MrAccessFlags(core::RemoteAccess::kNone));
    ASSERT_TRUE(mr.ok()) << mr.status();

    // The peer: WRITE i puts byte i into slot i % kSlots, until one fails.
    std::atomic<int> landed{0};
    absl::Status refused;
    std::thread writer([&] {
      const absl::Time end = absl::Now() + kCompletionTimeout;
      for (uint32_t i = 1; absl::Now() < end; ++i) {
        std::fill(source.begin(), source.end(), static_cast<uint8_t>(i));
        absl::Status s =
            peer.PostWrite({.wr_id = i,
                            .local_addr = source.data(),
                            .length = static_cast<uint32_t>(kSlot),
                            .lkey = (*mr)->lkey(),
                            .remote_addr = base + (i % kSlots) * kSlot,
                            .rkey = rkey});
        if (s.ok()) s = icq->WaitOne(end);
        if (!s.ok()) {
          refused = s;
          return;
        }
        landed.fetch_add(1);
      }
      refused = absl::DeadlineExceededError("never refused");
    });
    // Some WRITEs land first, so that the revocation races them.
    EXPECT_TRUE(Eventually([&] { return landed.load() >= 3; }));
    // (EXPECT: the writer must be joined whatever happens.)
    const absl::Status revoked = c.revoke({target->id(), ""});
    EXPECT_TRUE(revoked.ok()) << revoked;
    const auto* bytes = reinterpret_cast<const uint8_t*>(target->data());
    const std::vector<uint8_t> then(bytes, bytes + kSlot * kSlots);
    writer.join();
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
    EXPECT_EQ(Compare(bytes, then.data(), then.size()), "")
        << "a WRITE landed after the revoking call returned (" << landed.load()
        << " landed before)";
  }
}

TEST_F(VerbsNoticeLabTest, AChannelSurvivesAPeerThatSkipsOrInventsAcks) {
  // A raw QP plays the serving peer: it reads the notices and answers as
  // it likes.
  std::vector<std::unique_ptr<QueuePair>> initiators, raw;
  std::shared_ptr<CompletionQueue> icq, raw_cq;
  MakePairs(1, &initiators, &icq, &raw, &raw_cq);
  if (HasFatalFailure()) return;
  QueuePair& peer = *raw[0];
  auto slots = NoticeBuffers::Create(device_, 2 * kNoticeCredits);
  ASSERT_TRUE(slots.ok()) << slots.status();
  constexpr uint64_t kRecv = uint64_t{1} << 40;
  for (size_t k = 0; k < kNoticeCredits; ++k) {
    ASSERT_TRUE((*slots)->PostRecv(peer, k, kRecv | k).ok());
  }
  VerbsChannelOptions options;
  options.loop = runtime_->loop(0);
  options.peer = "odd-peer";
  options.local_device = info_.name;
  options.remote_device = info_.name;
  auto channel = VerbsChannel::Create(options, icq, std::move(initiators), {0});
  ASSERT_TRUE(channel.ok()) << channel.status();
  channel_ = *std::move(channel);

  std::shared_ptr<Pending> pending =
      PostWithImmediates({{0, 64, 32, 11}, {32, 96, 32, 12}}, target_);
  // The two notices, as the channel encoded them.
  std::vector<Notice> notices;
  const absl::Time end = absl::Now() + kCompletionTimeout;
  while (notices.size() < 2 && absl::Now() < end) {
    ibv_wc wcs[8];
    auto got = raw_cq->Wait(absl::MakeSpan(wcs), end);
    if (!got.ok()) break;
    for (size_t i = 0; i < *got; ++i) {
      ASSERT_EQ(wcs[i].status, IBV_WC_SUCCESS) << CompletionStatus(wcs[i]);
      if ((wcs[i].wr_id & kRecv) == 0) continue;
      auto notice = DecodeNotice(absl::MakeConstSpan(
          (*slots)->slot(wcs[i].wr_id & ~kRecv), wcs[i].byte_len));
      ASSERT_TRUE(notice.ok()) << notice.status();
      notices.push_back(*notice);
    }
  }
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_EQ(notices[0].region_id, inbox_->id());
  EXPECT_EQ(notices[0].offset, 64u);
  EXPECT_EQ(notices[0].length, 32u);
  EXPECT_EQ(notices[0].immediate, 11u);
  EXPECT_EQ(notices[0].rkey, target_->rkeys[0].rkey);
  EXPECT_EQ(notices[1].immediate, 12u);
  EXPECT_LT(notices[0].tag, notices[1].tag);
  EXPECT_EQ(std::memcmp(inbox_->data() + 64, local_->data(), 64), 0)
      << "the data is in place when the notice is received";

  size_t next_send = kNoticeCredits;
  auto answer = [&](uint64_t tag, NoticeResult result) {
    const auto bytes = EncodeNoticeAck(NoticeAck{tag, result});
    uint8_t* at = (*slots)->mutable_slot(next_send++);
    std::memcpy(at, bytes.data(), bytes.size());
    RdmaOp op;
    op.opcode = RdmaOp::Opcode::kSend;
    op.wr_id = next_send;
    op.local_addr = at;
    op.length = static_cast<uint32_t>(bytes.size());
    op.lkey = (*slots)->lkey();
    ASSERT_TRUE(peer.Post(absl::MakeConstSpan(&op, 1)).ok());
  };
  // An ack for a notice never sent is ignored; skipping the first notice's
  // ack and answering the second fails the first, and only it.
  answer(notices[1].tag + 1000, NoticeResult::kDelivered);
  answer(notices[1].tag, NoticeResult::kDelivered);
  std::vector<Result> done = Await(*pending);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].status.code(), absl::StatusCode::kUnavailable)
      << done[0].status;
  EXPECT_THAT(std::string(done[0].status.message()),
              HasSubstr("did not acknowledge"));
  EXPECT_TRUE(done[1].status.ok()) << done[1].status;
  EXPECT_FALSE(channel_->NeedsReconnect());
}

}  // namespace
}  // namespace rdmad::verbs
