// The one operation type (rdmad::Op) end to end: Queue::Run, the loop every
// queue user writes (submit what fits, wait, poll, until all are done), and
// Client::Batch with ops that name their remote region by handle or by
// RemoteRegion, with tags, immediates and timeouts, returning a Completion
// per op.
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kRegionSize = 64 * 1024;

class QueueRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = DaemonProcess::Start(dir_.path(), "d");
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    client_ = Connect(*daemon_);
    ASSERT_NE(client_, nullptr);
    auto target = CreateOwnTarget(*client_, "target", kRegionSize);
    ASSERT_TRUE(target.ok()) << target.status();
    target_ = std::move(target->handle);
    src_ = std::move(target->source);
    for (uint64_t i = 0; i < kRegionSize; ++i) {
      src_->data()[i] = static_cast<char>(i * 7 + 3);
    }
  }

  // `n` WRITEs of 64 bytes from src_ to the same offsets of "target", op i
  // tagged 1000 + i.
  std::vector<Op> Writes(uint64_t n) {
    std::vector<Op> ops;
    for (uint64_t i = 0; i < n; ++i) {
      ops.push_back({.kind = Op::Kind::kWrite,
                     .local = src_.get(),
                     .local_offset = i * 64,
                     .remote = &target_,
                     .remote_offset = i * 64,
                     .length = 64,
                     .tag = 1000 + i});
    }
    return ops;
  }

  // "target" as this process sees it now.
  std::string Target() {
    auto view = client_->MapRegion("target");
    EXPECT_TRUE(view.ok()) << view.status();
    return view.ok() ? std::string(view->data(), kRegionSize) : "";
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  RemoteHandle target_;
  std::unique_ptr<Buffer> src_;
};

// More operations than the queue holds (8 submission entries, 16 in
// flight): all of them run, and the results come back in op order with
// their own tags, whatever order they completed in.
TEST_F(QueueRunTest, RunsMoreOpsThanTheQueueHoldsAndAnswersInOpOrder) {
  auto queue = client_->OpenQueue({.depth = 8});
  ASSERT_TRUE(queue.ok()) << queue.status();
  const std::vector<Op> ops = Writes(200);
  auto done = (*queue)->Run(ops);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->size(), ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Completion& c = (*done)[i];
    EXPECT_EQ(c.kind, Completion::Kind::kCompletion);
    EXPECT_EQ(c.tag, 1000 + i);
    EXPECT_TRUE(c.status.ok()) << i << ": " << c.status;
    EXPECT_EQ(c.bytes, 64u);
    EXPECT_EQ(c.transport, Transport::kLocal);
  }
  EXPECT_EQ((*queue)->in_flight(), 0u);
  EXPECT_EQ(Target().substr(0, 200 * 64), std::string(src_->data(), 200 * 64));
  // Nothing left on the ring for the next caller.
  Completion left[4];
  EXPECT_EQ((*queue)->Poll(left), 0u);
  EXPECT_TRUE((*queue)->Run({}).ok());
}

// One op fails: Run submits no more, waits for those in flight, and says
// which op failed and why. The ops after the failure's window never ran,
// and the queue serves the next Run.
TEST_F(QueueRunTest, StopsAtTheFirstFailedOpAndNamesIt) {
  auto queue = client_->OpenQueue({.depth = 8});
  ASSERT_TRUE(queue.ok()) << queue.status();
  std::vector<Op> ops = Writes(200);
  ops[3].remote_offset = kRegionSize;  // past the end
  auto done = (*queue)->Run(ops);
  ASSERT_EQ(done.status().code(), absl::StatusCode::kOutOfRange)
      << done.status();
  EXPECT_THAT(done.status().message(),
              HasSubstr("operation 3 (tag 1003) of 200: "));
  EXPECT_EQ((*queue)->in_flight(), 0u) << "Run left operations in flight";
  const std::string target = Target();
  EXPECT_EQ(target.substr(0, 3 * 64), std::string(src_->data(), 3 * 64));
  EXPECT_EQ(target.substr(199 * 64, 64), std::string(64, '\0'))
      << "the last op ran after the failure was known";

  auto again = (*queue)->Run(Writes(20));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->size(), 20u);
}

// Run tells its completions by tag: with another op of the caller's in
// flight it would take that op's completion for one of its own.
TEST_F(QueueRunTest, WantsAQueueWithNothingInFlight) {
  auto queue = client_->OpenQueue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  const std::vector<Op> one = Writes(1);
  auto queued = (*queue)->Submit(one);
  ASSERT_TRUE(queued.ok()) << queued.status();
  auto refused = (*queue)->Run(Writes(4));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition)
      << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("in flight"));
  ASSERT_TRUE((*queue)->Wait(absl::Seconds(30)).ok());
  Completion c[1];
  ASSERT_EQ((*queue)->Poll(c), 1u);
  EXPECT_EQ(c[0].tag, 1000u);
  EXPECT_TRUE((*queue)->Run(Writes(4)).ok());
}

// What Submit refuses, Run refuses before anything is queued, naming the
// op by its place in the caller's ops and its tag.
TEST_F(QueueRunTest, RefusesOpsAQueueCannotTakeBeforeQueueingAny) {
  auto queue = client_->OpenQueue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  const RemoteRegion by_name{.name = "target"};
  std::vector<Op> ops = Writes(3);
  ops[1].remote = &by_name;
  auto done = (*queue)->Run(ops);
  EXPECT_EQ(done.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(done.status().message(), HasSubstr("operation 1 (tag 1001)"));
  EXPECT_THAT(done.status().message(), HasSubstr("RemoteHandle"));
  ops = Writes(3);
  ops[2].local = nullptr;
  EXPECT_THAT((*queue)->Run(ops).status().message(),
              HasSubstr("operation 2 (tag 1002) of 3, nothing queued"));
  EXPECT_EQ((*queue)->in_flight(), 0u);
  EXPECT_EQ(Target(), std::string(kRegionSize, '\0'));
}

// On the session's notification queue, notifications come between Run's
// completions: Run keeps them, and Poll (ready at once, as Wait and Arm
// say) returns every one.
TEST_F(QueueRunTest, KeepsNotificationsForPoll) {
  auto notes = client_->OpenQueue({.depth = 8, .notifications = true});
  ASSERT_TRUE(notes.ok()) << notes.status();
  std::vector<Op> ops = Writes(24);
  for (size_t i = 0; i < ops.size(); ++i) {
    ops[i].immediate = static_cast<uint32_t>(i + 1);
  }
  auto done = (*notes)->Run(ops);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->size(), ops.size());
  std::set<uint32_t> immediates;
  Completion got[8];
  const absl::Time end = absl::Now() + absl::Seconds(30);
  while (immediates.size() < ops.size() && absl::Now() < end) {
    const size_t n = (*notes)->Poll(got);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(got[i].kind, Completion::Kind::kNotification);
      EXPECT_EQ(got[i].bytes, 64u);
      EXPECT_EQ(got[i].offset, (got[i].immediate - 1) * 64);
      EXPECT_TRUE(immediates.insert(got[i].immediate).second)
          << "notification " << got[i].immediate << " came twice";
    }
    if (n == 0) {
      ASSERT_TRUE((*notes)->Wait(end).ok());
    }
  }
  EXPECT_EQ(immediates.size(), ops.size()) << "notifications were lost";
}

// A notification Run kept is ready: Wait returns at once, and Arm says to
// Poll instead of sleeping on the eventfd.
TEST_F(QueueRunTest, AKeptNotificationIsReadyForWaitAndArm) {
  auto notes = client_->OpenQueue({.depth = 8, .notifications = true});
  ASSERT_TRUE(notes.ok()) << notes.status();
  // A notification waits on the ring (written through the client's own
  // queue), where Run finds it before its own completions.
  std::vector<Op> noted = Writes(1);
  noted[0].immediate = 9;
  auto written = client_->Batch(noted);
  ASSERT_TRUE(written.ok() && (*written)[0].status.ok());
  ASSERT_TRUE((*notes)->Wait(absl::Seconds(30)).ok());
  auto done = (*notes)->Run(Writes(4));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_FALSE((*notes)->Arm()) << "armed to sleep with a notification kept";
  EXPECT_TRUE((*notes)->Wait(absl::ZeroDuration()).ok());
  Completion got[2];
  ASSERT_EQ((*notes)->Poll(got), 1u);
  EXPECT_EQ(got[0].kind, Completion::Kind::kNotification);
  EXPECT_EQ(got[0].immediate, 9u);
  EXPECT_EQ((*notes)->Wait(absl::ZeroDuration()).code(),
            absl::StatusCode::kDeadlineExceeded);
}

// Client::Batch takes the same ops as a queue: by handle or by
// RemoteRegion (whose offset adds to the op's), with tags and immediates,
// and answers with a Completion per op.
TEST_F(QueueRunTest, BatchTakesHandlesAndRegionsWithTheirTagsAndImmediates) {
  auto notes = client_->OpenQueue({.notifications = true});
  ASSERT_TRUE(notes.ok()) << notes.status();
  const RemoteRegion at_4k{.name = "target", .offset = 4096};
  const RemoteRegion missing{.name = "missing"};
  const std::vector<Op> ops = {{.kind = Op::Kind::kWrite,
                                .local = src_.get(),
                                .remote = &target_,
                                .remote_offset = 0,
                                .length = 100,
                                .tag = 41},
                               {.kind = Op::Kind::kWrite,
                                .local = src_.get(),
                                .local_offset = 100,
                                .remote = &at_4k,
                                .remote_offset = 8,
                                .length = 50,
                                .tag = 42,
                                .immediate = 77},
                               {.kind = Op::Kind::kRead,
                                .local = src_.get(),
                                .remote = &missing,
                                .length = 8,
                                .tag = 43}};
  auto done = client_->Batch(ops);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->size(), 3u);
  EXPECT_EQ((*done)[0].tag, 41u);
  EXPECT_TRUE((*done)[0].status.ok()) << (*done)[0].status;
  EXPECT_EQ((*done)[0].bytes, 100u);
  EXPECT_EQ((*done)[1].tag, 42u);
  EXPECT_TRUE((*done)[1].status.ok()) << (*done)[1].status;
  EXPECT_EQ((*done)[1].bytes, 50u);
  EXPECT_EQ((*done)[2].tag, 43u);
  EXPECT_EQ((*done)[2].status.code(), absl::StatusCode::kNotFound);
  const std::string target = Target();
  EXPECT_EQ(target.substr(0, 100), std::string(src_->data(), 100));
  EXPECT_EQ(target.substr(4096 + 8, 50), std::string(src_->data() + 100, 50));
  ASSERT_TRUE((*notes)->Wait(absl::Seconds(30)).ok());
  Completion note[2];
  ASSERT_EQ((*notes)->Poll(note), 1u);
  EXPECT_EQ(note[0].immediate, 77u);
  EXPECT_EQ(note[0].offset, 4096u + 8);
}

// A handle of the session before a daemon restart fails its own op (open
// it again); the other ops of the batch run.
TEST_F(QueueRunTest, AStaleHandleFailsItsOwnOpInABatch) {
  ASSERT_TRUE(daemon_->Restart().ok()) << daemon_->LogTail();
  ASSERT_TRUE(client_->CreateRegion("target", kRegionSize, Access::kNone).ok());
  auto fresh = client_->Allocate(4096);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  const RemoteRegion by_name{.name = "target"};
  const std::vector<Op> ops = {
      {.local = &*fresh, .remote = &target_, .length = 8, .tag = 1},
      {.local = &*fresh, .remote = &by_name, .length = 8, .tag = 2}};
  auto done = client_->Batch(ops);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ((*done)[0].status.code(), absl::StatusCode::kFailedPrecondition)
      << (*done)[0].status;
  EXPECT_THAT((*done)[0].status.message(), HasSubstr("open it again"));
  EXPECT_TRUE((*done)[1].status.ok()) << (*done)[1].status;
}

// An op's own timeout holds in a Batch (the call's timeout is 30 s): a
// WRITE to a daemon that stopped answering fails DEADLINE_EXCEEDED at it.
TEST_F(QueueRunTest, BatchHoldsEachOpToItsOwnTimeout) {
  auto peer = DaemonProcess::Start(dir_.path(), "peer");
  ASSERT_TRUE(peer.ok()) << peer.status();
  auto owner = Connect(**peer);
  ASSERT_NE(owner, nullptr);
  ASSERT_TRUE(owner->CreateRegion("far", 4096, Access::kReadWrite).ok());
  const RemoteRegion far = Remote(**peer, "far");
  // Connected and resolved first, so that only the transfer can stall.
  ASSERT_TRUE(client_->Write(*src_, 0, far, 0, 8).ok());
  ASSERT_TRUE((*peer)->Pause()) << "the peer did not stop";
  const Op op{.local = src_.get(),
              .remote = &far,
              .length = 8,
              .timeout = absl::Milliseconds(300)};
  const absl::Time start = absl::Now();
  auto done = client_->Batch({&op, 1});
  const absl::Duration took = absl::Now() - start;
  (*peer)->Resume();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ((*done)[0].status.code(), absl::StatusCode::kDeadlineExceeded)
      << (*done)[0].status;
  EXPECT_LT(took, absl::Seconds(10));
}

}  // namespace
}  // namespace rdmad::testing
