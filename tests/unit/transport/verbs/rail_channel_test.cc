// RailChannel (daemon/transport/verbs/rail_channel.h) over a fake channel
// per rail: where operations go, the keys and offsets of their pieces, a
// striped WRITE with an immediate, a failed rail's pieces re-issued, port
// events, pauses and the rebuild they ask for, NUMA and pinned rails.
#include "daemon/transport/verbs/rail_channel.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/core/region.h"
#include "daemon/core/shm_segment.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/sizes.h"

namespace rdmad::verbs {
namespace {

using ::testing::HasSubstr;

using ::rdmad::testing::kKiB;
using ::rdmad::testing::kMiB;

// One rail's channel: keeps what was posted until the test completes it;
// Close fails what is left, as a VerbsChannel does.
class FakeRail final : public transport::DataChannel {
 public:
  core::TransportKind kind() const override {
    return core::TransportKind::kVerbs;
  }
  absl::StatusOr<transport::RemoteKey> KeyFor(
      const core::RemoteRegionInfo&) const override {
    return transport::RemoteKey{};
  }
  void Post(absl::Span<transport::RemoteOp> ops) override {
    ++posts;
    for (auto& op : ops) {
      if (closed) {
        op.done(absl::UnavailableError("closed"));
      } else {
        pending.push_back(std::move(op));
      }
    }
  }
  transport::ChannelInfo Describe() const override {
    transport::ChannelInfo info;
    info.connections.resize(2);
    return info;
  }
  bool NeedsReconnect() const override { return broken; }
  void Close() override {
    closed = true;
    FailAll(absl::UnavailableError("closed"));
  }

  // Completes the oldest pending op.
  void CompleteFirst(absl::Status status = absl::OkStatus()) {
    ASSERT_FALSE(pending.empty());
    transport::RemoteOp op = std::move(pending.front());
    pending.erase(pending.begin());
    op.done(std::move(status));
  }
  void CompleteAll(absl::Status status = absl::OkStatus()) {
    while (!pending.empty()) CompleteFirst(status);
  }
  // Only what is pending now, not what their completions post.
  void CompleteNow() {
    for (size_t n = pending.size(); n > 0; --n) CompleteFirst();
  }
  // The QPs failed: what is posted comes back UNAVAILABLE.
  void Break() {
    broken = true;
    FailAll(absl::UnavailableError("transport retry counter exceeded"));
  }
  void FailAll(const absl::Status& status) {
    std::vector<transport::RemoteOp> ops;
    ops.swap(pending);
    for (auto& op : ops) op.done(status);
  }
  uint64_t PendingBytes() const {
    uint64_t n = 0;
    for (const auto& op : pending) n += op.length;
    return n;
  }

  std::vector<transport::RemoteOp> pending;
  bool broken = false;
  bool closed = false;
  int posts = 0;
};

class RailChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto segment = core::ShmSegment::Create("rails", 64 * kMiB);
    ASSERT_TRUE(segment.ok()) << segment.status();
    local_ = std::make_shared<core::Region>(
        1, "kv/shard", core::RegionOwnerKind::kDaemon, core::Caller{},
        *std::move(segment), nullptr);
    auto remote = std::make_shared<core::RemoteRegionInfo>();
    remote->peer = "10.0.0.2:7471";
    remote->region_id = 7;
    remote->name = "dst";
    remote->length = 1ull << 30;
    remote->addr = 0x100000;
    remote->rkeys = {{"rxe0", 0, 0x1111}, {"rxe1", 0, 0x2222}};
    remote_ = remote;
    options_.pause_min = absl::Seconds(30);
    options_.pause_max = absl::Seconds(300);
    peer_rails_ = std::make_shared<PeerRails>(options_, 2);
  }

  // Two rails; rail 1 without a channel when `rail1_error` says why it
  // could not be set up.
  std::shared_ptr<RailChannel> MakeChannel(std::vector<int> numa = {-1, -1},
                                           std::string rail1_error = "") {
    rails_.clear();
    std::vector<RailLink> links;
    for (int r = 0; r < 2; ++r) {
      auto rail = std::make_shared<FakeRail>();
      rails_.push_back(rail);
      RailLink link;
      if (r == 1 && !rail1_error.empty()) {
        link.setup_error = rail1_error;
      } else {
        link.channel = rail;
      }
      link.device = absl::StrCat("rxe", r);
      link.remote_device = absl::StrCat("rxe", r);
      link.numa_node = numa[r];
      links.push_back(std::move(link));
    }
    RailChannelOptions options;
    options.peer = "10.0.0.2:7471";
    options.rails = peer_rails_;
    options.pins = pins_;
    options.now = [this] {
      absl::MutexLock lock(&clock_mu_);
      return now_;
    };
    options.memory_node = [this](const void*) { return memory_node_; };
    return RailChannel::Create(std::move(options), std::move(links));
  }

  // An op of `length` bytes at `offset` in both regions; its status lands
  // in `*result`.
  transport::RemoteOp Op(uint64_t length, absl::Status* result,
                         uint64_t offset = 0) {
    transport::RemoteOp op;
    op.op = core::OpType::kWrite;
    op.local = local_;
    op.local_addr = local_->data() + offset;
    op.length = length;
    op.remote = remote_;
    op.key = transport::RemoteKey{remote_->addr, 0x1111};
    op.remote_offset = offset;
    op.deadline = now_ + absl::Seconds(60);
    *result = absl::UnknownError("not done");
    op.done = [result](absl::Status s) { *result = std::move(s); };
    return op;
  }
  void PostOne(RailChannel& channel, transport::RemoteOp op) {
    channel.Post(absl::MakeSpan(&op, 1));
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&clock_mu_);
    now_ += d;
  }
  const transport::RailInfo& Rail(const transport::ChannelInfo& info,
                                  size_t index) {
    return info.rails.at(index);
  }

  RailSchedulerOptions options_;
  std::shared_ptr<PeerRails> peer_rails_;
  std::vector<std::shared_ptr<FakeRail>> rails_;
  std::vector<RailPinSet> pins_;
  std::shared_ptr<core::Region> local_;
  std::shared_ptr<const core::RemoteRegionInfo> remote_;
  absl::Mutex clock_mu_;
  absl::Time now_ = absl::FromUnixSeconds(1000000);
  int memory_node_ = -1;
};

TEST_F(RailChannelTest, SmallOperationsGoWholeToTheLeastLoadedRail) {
  auto channel = MakeChannel();
  absl::Status first, second, third;
  PostOne(*channel, Op(8, &first));
  PostOne(*channel, Op(64 * kKiB, &second, 4096));
  // One piece each, whole, one on each rail (the first was busy).
  ASSERT_EQ(rails_[0]->pending.size(), 1u);
  ASSERT_EQ(rails_[1]->pending.size(), 1u);
  EXPECT_EQ(rails_[0]->pending[0].length, 8u);
  EXPECT_EQ(rails_[1]->pending[0].length, 64 * kKiB);
  EXPECT_EQ(rails_[1]->pending[0].key.key, 0x2222u) << "rxe1's rkey";
  EXPECT_EQ(rails_[1]->pending[0].remote_offset, 4096u);
  rails_[1]->CompleteAll();
  EXPECT_TRUE(second.ok()) << second;
  // Rail 1 is idle now, rail 0 still holds 8 bytes.
  PostOne(*channel, Op(100, &third));
  EXPECT_EQ(rails_[1]->pending.size(), 1u);
  rails_[0]->CompleteAll();
  rails_[1]->CompleteAll();
  EXPECT_TRUE(first.ok()) << first;
  EXPECT_TRUE(third.ok()) << third;
  const auto info = channel->Describe();
  EXPECT_EQ(info.state, transport::ChannelState::kReady);
  EXPECT_EQ(Rail(info, 0).ops, 1u);
  EXPECT_EQ(Rail(info, 1).bytes, 64 * kKiB + 100);
  EXPECT_EQ(info.connections.size(), 4u);
  EXPECT_EQ(info.connections[3].rail, 1u);
}

TEST_F(RailChannelTest, LargeOperationIsSplitAndCompletesWithItsLastPiece) {
  auto channel = MakeChannel();
  absl::Status result;
  const uint64_t length = 16 * kMiB + 5;
  PostOne(*channel, Op(length, &result, 12288));
  ASSERT_FALSE(rails_[0]->pending.empty());
  ASSERT_FALSE(rails_[1]->pending.empty());
  EXPECT_EQ(rails_[0]->posts, 1) << "one Post per rail";
  EXPECT_EQ(rails_[1]->posts, 1);
  // The pieces tile the operation, each with its rail's key.
  uint64_t covered = 0;
  for (int r = 0; r < 2; ++r) {
    for (const auto& piece : rails_[r]->pending) {
      const uint64_t offset = piece.remote_offset - 12288;
      EXPECT_EQ(piece.local_addr, local_->data() + 12288 + offset);
      EXPECT_EQ(piece.key.key, r == 0 ? 0x1111u : 0x2222u);
      EXPECT_EQ(piece.key.base, remote_->addr);
      EXPECT_FALSE(piece.immediate.has_value());
      covered += piece.length;
    }
  }
  EXPECT_EQ(covered, length);
  EXPECT_NEAR(static_cast<double>(rails_[0]->PendingBytes()),
              static_cast<double>(rails_[1]->PendingBytes()), 4.0 * kMiB);
  EXPECT_EQ(Rail(channel->Describe(), 1).outstanding_bytes,
            rails_[1]->PendingBytes());
  rails_[0]->CompleteAll();
  rails_[1]->CompleteFirst();
  EXPECT_EQ(result.code(), absl::StatusCode::kUnknown) << "not done yet";
  rails_[1]->CompleteAll();
  EXPECT_TRUE(result.ok()) << result;
}

TEST_F(RailChannelTest, StripedWriteWithImmediateIsAnnouncedAfterEveryPiece) {
  auto channel = MakeChannel();
  absl::Status result;
  transport::RemoteOp op = Op(1 * kMiB, &result, 8192);
  op.immediate = 42;
  PostOne(*channel, std::move(op));
  // Every piece but the last is out, none with the immediate.
  std::vector<transport::RemoteOp*> pieces;
  uint64_t out = 0;
  for (auto& rail : rails_) {
    for (auto& piece : rail->pending) {
      EXPECT_FALSE(piece.immediate.has_value());
      out += piece.length;
    }
  }
  ASSERT_LT(out, 1 * kMiB);
  const uint64_t last = 1 * kMiB - out;
  // Until all of them completed, nothing announces the WRITE.
  rails_[0]->CompleteNow();
  for (auto& rail : rails_) {
    for (auto& piece : rail->pending) {
      EXPECT_FALSE(piece.immediate.has_value()) << "announced too early";
    }
  }
  rails_[1]->CompleteNow();
  // Now the last piece goes, announcing the whole range.
  transport::RemoteOp* final_piece = nullptr;
  for (auto& rail : rails_) {
    for (auto& piece : rail->pending) final_piece = &piece;
  }
  ASSERT_NE(final_piece, nullptr);
  EXPECT_EQ(final_piece->length, last);
  EXPECT_EQ(final_piece->immediate, 42u);
  EXPECT_EQ(final_piece->remote_offset - final_piece->notify_before, 8192u);
  EXPECT_EQ(final_piece->length + final_piece->notify_before, 1 * kMiB);
  EXPECT_EQ(result.code(), absl::StatusCode::kUnknown);
  rails_[0]->CompleteAll();
  rails_[1]->CompleteAll();
  EXPECT_TRUE(result.ok()) << result;
}

TEST_F(RailChannelTest, SmallWriteWithImmediateGoesWholeWithIt) {
  auto channel = MakeChannel();
  absl::Status result;
  transport::RemoteOp op = Op(4096, &result);
  op.immediate = 7;
  PostOne(*channel, std::move(op));
  auto& rail = rails_[0]->pending.empty() ? rails_[1] : rails_[0];
  ASSERT_EQ(rail->pending.size(), 1u);
  EXPECT_EQ(rail->pending[0].immediate, 7u);
  EXPECT_EQ(rail->pending[0].notify_before, 0u);
  rail->CompleteAll();
  EXPECT_TRUE(result.ok());
}

TEST_F(RailChannelTest, AFailedRailsPiecesAreReissuedOnTheOthers) {
  auto channel = MakeChannel();
  absl::Status result;
  PostOne(*channel, Op(16 * kMiB, &result));
  const uint64_t on_rail1 = rails_[1]->PendingBytes();
  ASSERT_GT(on_rail1, 0u);
  rails_[1]->Break();
  // Rail 1's pieces went to rail 0; nothing failed.
  EXPECT_EQ(rails_[0]->PendingBytes(), 16 * kMiB);
  EXPECT_EQ(result.code(), absl::StatusCode::kUnknown);
  rails_[0]->CompleteAll();
  EXPECT_TRUE(result.ok()) << result;

  auto info = channel->Describe();
  EXPECT_EQ(info.state, transport::ChannelState::kDegraded);
  EXPECT_EQ(Rail(info, 1).state, transport::RailStatus::kPaused);
  EXPECT_EQ(Rail(info, 1).pauses, 1u);
  EXPECT_GT(Rail(info, 1).errors, 0u);
  EXPECT_EQ(Rail(info, 1).paused_left, absl::Seconds(30));
  EXPECT_THAT(Rail(info, 1).last_error, HasSubstr("retry counter exceeded"));
  EXPECT_EQ(Rail(info, 0).state, transport::RailStatus::kActive);
  // New work avoids it, large or small, and the channel does not ask for a
  // new Connect while the rail rests.
  absl::Status more;
  PostOne(*channel, Op(8 * kMiB, &more));
  EXPECT_TRUE(rails_[1]->pending.empty());
  EXPECT_FALSE(channel->NeedsReconnect());
  rails_[0]->CompleteAll();
  EXPECT_TRUE(more.ok());
  // Once the pause is over, and the channel is idle: rebuild.
  Advance(absl::Seconds(29));
  EXPECT_FALSE(channel->NeedsReconnect());
  Advance(absl::Seconds(1));
  EXPECT_TRUE(channel->NeedsReconnect());
}

TEST_F(RailChannelTest, ARebuildWaitsForAnIdleMomentUpToTheFirstPause) {
  auto channel = MakeChannel();
  absl::Status result;
  PostOne(*channel, Op(1 * kMiB, &result));
  rails_[1]->Break();
  Advance(absl::Seconds(30));
  // An operation in flight: not yet.
  EXPECT_FALSE(channel->NeedsReconnect());
  Advance(absl::Seconds(29));
  EXPECT_FALSE(channel->NeedsReconnect());
  // Never idle for as long as the first pause: rebuild anyway.
  Advance(absl::Seconds(1));
  EXPECT_TRUE(channel->NeedsReconnect());
  rails_[0]->CompleteAll();
  EXPECT_TRUE(result.ok());
}

TEST_F(RailChannelTest, ARebuiltChannelProbesTheReturningRail) {
  {
    auto channel = MakeChannel();
    absl::Status result;
    PostOne(*channel, Op(4 * kMiB, &result));
    rails_[1]->Break();
    rails_[0]->CompleteAll();
    ASSERT_TRUE(result.ok());
    channel->Close();
  }
  Advance(absl::Seconds(31));
  // The peer layer built a new pool: same peer, same PeerRails.
  auto channel = MakeChannel();
  absl::Status result;
  PostOne(*channel, Op(16 * kMiB, &result));
  // Rail 1 takes exactly one piece, its probe.
  ASSERT_EQ(rails_[1]->pending.size(), 1u);
  EXPECT_EQ(Rail(channel->Describe(), 1).state,
            transport::RailStatus::kProbing);
  absl::Status small;
  PostOne(*channel, Op(8, &small));
  EXPECT_EQ(rails_[1]->pending.size(), 1u) << "small ops avoid a probe";
  rails_[1]->CompleteAll();
  EXPECT_EQ(Rail(channel->Describe(), 1).state,
            transport::RailStatus::kActive);
  rails_[0]->CompleteAll();
  EXPECT_TRUE(result.ok());
  EXPECT_TRUE(small.ok());
  EXPECT_FALSE(channel->NeedsReconnect());
  // If it fails again soon, the pause doubles.
  PostOne(*channel, Op(16 * kMiB, &result));
  rails_[1]->Break();
  EXPECT_EQ(Rail(channel->Describe(), 1).paused_left, absl::Seconds(60));
  rails_[0]->CompleteAll();
  EXPECT_TRUE(result.ok());
}

TEST_F(RailChannelTest, APortGoingDownPausesItsRailAtOnce) {
  auto channel = MakeChannel();
  absl::Status result;
  PostOne(*channel, Op(16 * kMiB, &result));
  ASSERT_FALSE(rails_[1]->pending.empty());
  channel->OnPortChange("rxe1", 1, false);
  // Its channel closed: its pieces are on rail 0 now.
  EXPECT_TRUE(rails_[1]->closed);
  EXPECT_EQ(rails_[0]->PendingBytes(), 16 * kMiB);
  rails_[0]->CompleteAll();
  EXPECT_TRUE(result.ok()) << result;
  auto info = channel->Describe();
  EXPECT_EQ(Rail(info, 1).state, transport::RailStatus::kPaused);
  EXPECT_FALSE(Rail(info, 1).port_active);
  EXPECT_THAT(Rail(info, 1).last_error, HasSubstr("went down"));
  // Its pause over, but the port still down: no rebuild.
  Advance(absl::Seconds(40));
  EXPECT_FALSE(channel->NeedsReconnect());
  channel->OnPortChange("rxe1", 1, true);
  EXPECT_TRUE(channel->NeedsReconnect());
  // Another device's port is none of its business.
  auto other = MakeChannel();
  other->OnPortChange("mlx5_0", 1, false);
  EXPECT_FALSE(rails_[0]->closed);
  EXPECT_FALSE(rails_[1]->closed);
}

TEST_F(RailChannelTest, ARailThatCouldNotBeSetUpRestsThenIsRebuilt) {
  auto channel = MakeChannel({-1, -1}, "ibv_modify_qp(INIT->RTR): no GID");
  auto info = channel->Describe();
  ASSERT_EQ(info.rails.size(), 2u);
  EXPECT_EQ(Rail(info, 1).state, transport::RailStatus::kPaused);
  EXPECT_THAT(Rail(info, 1).last_error, HasSubstr("no GID"));
  EXPECT_EQ(info.state, transport::ChannelState::kDegraded);
  absl::Status result;
  PostOne(*channel, Op(16 * kMiB, &result));
  EXPECT_EQ(rails_[0]->PendingBytes(), 16 * kMiB);
  rails_[0]->CompleteAll();
  EXPECT_TRUE(result.ok());
  EXPECT_FALSE(channel->NeedsReconnect());
  Advance(absl::Seconds(30));
  EXPECT_TRUE(channel->NeedsReconnect());
  // A rail the peer pairs nothing with (an rdmad without rails) is no
  // rail of this channel: nothing to rebuild.
  rails_.clear();
  RailLink only;
  only.channel = std::make_shared<FakeRail>();
  only.device = "rxe0";
  RailLink unpaired;
  unpaired.device = "rxe1";
  RailChannelOptions options;
  options.peer = "10.0.0.3:7471";
  options.rails = std::make_shared<PeerRails>(options_, 2);
  auto old_peer = RailChannel::Create(std::move(options), {only, unpaired});
  EXPECT_EQ(old_peer->Describe().rails.size(), 1u);
  EXPECT_FALSE(old_peer->NeedsReconnect());
}

TEST_F(RailChannelTest, AnyTransportFailureOfABrokenRailIsTheRails) {
  auto channel = MakeChannel();
  absl::Status result;
  PostOne(*channel, Op(16 * kMiB, &result));
  rails_[1]->broken = true;
  // A local QP error and a flush: the link, not the operation.
  rails_[1]->CompleteFirst(absl::InternalError("fatal error"));
  rails_[1]->CompleteAll(absl::AbortedError("flushed"));
  EXPECT_EQ(rails_[0]->PendingBytes(), 16 * kMiB);
  rails_[0]->CompleteAll();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(Rail(channel->Describe(), 1).state,
            transport::RailStatus::kPaused);
}

TEST_F(RailChannelTest, AnOperationsOwnFailureIsNotTheRailsFault) {
  auto channel = MakeChannel();
  absl::Status result;
  PostOne(*channel, Op(16 * kMiB, &result));
  // A remote access error fails the piece and breaks the rail's QPs.
  rails_[1]->broken = true;
  rails_[1]->CompleteFirst(absl::PermissionDeniedError("remote access error"));
  rails_[1]->CompleteAll(absl::UnavailableError("flushed"));
  EXPECT_EQ(result.code(), absl::StatusCode::kUnknown)
      << "done only when every piece is";
  rails_[0]->CompleteAll();
  EXPECT_EQ(result.code(), absl::StatusCode::kPermissionDenied) << result;
  auto info = channel->Describe();
  EXPECT_EQ(Rail(info, 1).pauses, 0u) << "no pause for the operation's fault";
  EXPECT_EQ(Rail(info, 1).state, transport::RailStatus::kRebuilding);
  EXPECT_TRUE(channel->NeedsReconnect()) << "idle: new QPs at once";
}

TEST_F(RailChannelTest, WithNoRailLeftOperationsFailAndTheChannelIsRebuilt) {
  auto channel = MakeChannel();
  rails_[0]->Break();
  rails_[1]->Break();
  absl::Status result;
  PostOne(*channel, Op(8, &result));
  EXPECT_EQ(result.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(result.message(), HasSubstr("no rail to peer 10.0.0.2:7471"));
  EXPECT_TRUE(channel->NeedsReconnect());
  EXPECT_EQ(channel->Describe().state, transport::ChannelState::kError);
}

TEST_F(RailChannelTest, APieceIsNotReissuedPastItsDeadline) {
  auto channel = MakeChannel();
  absl::Status result;
  PostOne(*channel, Op(16 * kMiB, &result));
  Advance(absl::Seconds(61));
  rails_[1]->Break();
  rails_[0]->CompleteAll();
  EXPECT_EQ(result.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(rails_[0]->pending.empty());
}

TEST_F(RailChannelTest, RegionsWithoutAKeyOnARailAvoidIt) {
  auto remote = std::make_shared<core::RemoteRegionInfo>(*remote_);
  remote->rkeys = {{"rxe1", 0, 0x2222}};
  remote_ = remote;
  auto channel = MakeChannel();
  absl::Status result;
  PostOne(*channel, Op(16 * kMiB, &result));
  EXPECT_TRUE(rails_[0]->pending.empty());
  EXPECT_EQ(rails_[1]->PendingBytes(), 16 * kMiB);
  rails_[1]->CompleteAll();
  EXPECT_TRUE(result.ok());
  remote->rkeys.clear();
  PostOne(*channel, Op(8, &result));
  EXPECT_EQ(result.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.message(), HasSubstr("not exported over verbs"));
  EXPECT_EQ(channel->KeyFor(*remote).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Keys of a local registration on the devices named.
class FakeRegistration final : public core::Registration {
 public:
  explicit FakeRegistration(std::vector<core::DeviceRegistration> keys)
      : keys_(std::move(keys)) {}
  const std::vector<core::DeviceRegistration>& keys() const override {
    return keys_;
  }

 private:
  std::vector<core::DeviceRegistration> keys_;
};

TEST_F(RailChannelTest, LocalMemoryNotRegisteredOnARailsDeviceAvoidsIt) {
  auto segment = core::ShmSegment::Create("rails-dmabuf", 16 * kMiB);
  ASSERT_TRUE(segment.ok()) << segment.status();
  local_ = std::make_shared<core::Region>(
      2, "gpu/kv", core::RegionOwnerKind::kDaemon, core::Caller{},
      *std::move(segment),
      std::make_unique<FakeRegistration>(
          std::vector<core::DeviceRegistration>{{"rxe1", 0x21, 0x22}}));
  auto channel = MakeChannel();
  absl::Status result;
  PostOne(*channel, Op(16 * kMiB, &result));
  EXPECT_TRUE(rails_[0]->pending.empty());
  EXPECT_EQ(rails_[1]->PendingBytes(), 16 * kMiB);
  rails_[1]->CompleteAll();
  EXPECT_TRUE(result.ok()) << result;
  PostOne(*channel, Op(8, &result));
  EXPECT_TRUE(rails_[0]->pending.empty());
  EXPECT_EQ(rails_[1]->PendingBytes(), 8u);
  rails_[1]->CompleteAll();
  EXPECT_TRUE(result.ok()) << result;
}

TEST_F(RailChannelTest, RailsOnTheBuffersNumaNodeComeFirst) {
  auto channel = MakeChannel({0, 1});
  memory_node_ = 1;
  absl::Status a, b;
  PostOne(*channel, Op(8, &a));
  PostOne(*channel, Op(16 * kMiB, &b));
  EXPECT_TRUE(rails_[0]->pending.empty()) << "rail 0 is on node 0";
  EXPECT_EQ(rails_[1]->PendingBytes(), 16 * kMiB + 8);
  rails_[1]->CompleteAll();
  // Node 1's rail down: the far one rather than nothing.
  rails_[1]->Break();
  PostOne(*channel, Op(8, &a));
  EXPECT_EQ(rails_[0]->pending.size(), 1u);
  rails_[0]->CompleteAll();
  EXPECT_TRUE(a.ok());
  EXPECT_TRUE(b.ok());
}

TEST_F(RailChannelTest, UnknownOrEqualNodesSayNothing) {
  memory_node_ = 1;
  for (std::vector<int> numa : {std::vector<int>{-1, 1}, {1, 1}}) {
    auto channel = MakeChannel(numa);
    absl::Status result;
    PostOne(*channel, Op(16 * kMiB, &result));
    EXPECT_GT(rails_[0]->PendingBytes(), 0u);
    EXPECT_GT(rails_[1]->PendingBytes(), 0u);
    rails_[0]->CompleteAll();
    rails_[1]->CompleteAll();
    EXPECT_TRUE(result.ok());
  }
}

TEST_F(RailChannelTest, PinnedRegionsUseTheirRails) {
  pins_ = {{"kv/", RailBit(0)}, {"kv/shard", RailBit(1)}};
  auto channel = MakeChannel();
  absl::Status result;
  PostOne(*channel, Op(16 * kMiB, &result));
  // The first pin that matches wins.
  EXPECT_EQ(rails_[0]->PendingBytes(), 16 * kMiB);
  EXPECT_TRUE(rails_[1]->pending.empty());
  rails_[0]->CompleteAll();
  EXPECT_TRUE(result.ok());
}

TEST_F(RailChannelTest, ClosingFailsWhatIsLeftAndRefusesMore) {
  auto channel = MakeChannel();
  absl::Status result;
  PostOne(*channel, Op(16 * kMiB, &result));
  channel->Close();
  EXPECT_EQ(result.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(rails_[0]->closed && rails_[1]->closed);
  EXPECT_EQ(Rail(channel->Describe(), 0).pauses, 0u)
      << "closing is no rail failure";
  PostOne(*channel, Op(8, &result));
  EXPECT_THAT(result.message(), HasSubstr("was closed"));
  EXPECT_FALSE(channel->NeedsReconnect());
}

TEST(PeerRailsRegistryTest, KeepsEachPeersRailsAndForgetsTheLeastRecent) {
  PeerRailsRegistry registry(RailSchedulerOptions{}, 2);
  auto a = registry.For("a:1", 2);
  EXPECT_EQ(registry.For("a:1", 2), a);
  auto b = registry.For("b:1", 2);
  registry.For("a:1", 2);
  registry.For("c:1", 2);  // b was used longest ago
  EXPECT_EQ(registry.For("a:1", 2), a);
  EXPECT_NE(registry.For("b:1", 2), b);
  // More rails than it was made for: made again.
  EXPECT_NE(registry.For("a:1", 3), a);
}

}  // namespace
}  // namespace rdmad::verbs
