// OpInbox on a real event loop: operations from other threads start on the
// loop, one task per batch; the loop's own posts start at once; a closed
// inbox fails what comes and hands back what was queued.
#include "daemon/transport/op_inbox.h"

#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/runtime/event_loop.h"
#include "gtest/gtest.h"

namespace rdmad::transport {
namespace {

// Starts an operation by completing it OK; records what it saw.
class RecordingChannel : public OpInbox::Channel {
 public:
  explicit RecordingChannel(runtime::EventLoop* loop) : loop_(loop) {}
  void StartOps(absl::Span<RemoteOp> ops) override {
    absl::MutexLock lock(&mu_);
    batches_.push_back(ops.size());
    for (RemoteOp& op : ops) {
      on_loop_ &= loop_->InLoopThread();
      op.done(absl::OkStatus());
    }
  }
  absl::Status ClosedError() const override {
    return absl::UnavailableError("test channel closed");
  }
  std::vector<size_t> batches() const {
    absl::MutexLock lock(&mu_);
    return batches_;
  }
  bool on_loop() const {
    absl::MutexLock lock(&mu_);
    return on_loop_;
  }

 private:
  runtime::EventLoop* const loop_;
  mutable absl::Mutex mu_;
  std::vector<size_t> batches_;
  bool on_loop_ = true;
};

RemoteOp OpInto(std::vector<absl::Status>* results, size_t i) {
  RemoteOp op;
  op.length = 8;
  op.done = [results, i](absl::Status status) { (*results)[i] = status; };
  return op;
}

class OpInboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loop = runtime::EventLoop::Create("inbox-test");
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = *std::move(loop);
    loop_->Start();
    channel_ = std::make_shared<RecordingChannel>(loop_.get());
  }
  void TearDown() override { loop_->Stop(); }

  // Runs `fn` on the loop thread and waits for it.
  void OnLoop(absl::AnyInvocable<void()> fn) {
    absl::Notification done;
    ASSERT_TRUE(loop_->Post([&] {
      fn();
      done.Notify();
    }));
    done.WaitForNotification();
  }

  std::unique_ptr<runtime::EventLoop> loop_;
  std::shared_ptr<RecordingChannel> channel_;
  OpInbox inbox_;
};

TEST_F(OpInboxTest, OpsFromAnotherThreadStartOnTheLoopInOneBatch) {
  std::vector<absl::Status> results(3, absl::UnknownError("not run"));
  // Hold the loop so that three posts queue before its task runs.
  absl::Notification release;
  ASSERT_TRUE(loop_->Post([&] { release.WaitForNotification(); }));
  for (size_t i = 0; i < results.size(); ++i) {
    RemoteOp op = OpInto(&results, i);
    inbox_.Post(channel_, *loop_, absl::MakeSpan(&op, 1));
  }
  release.Notify();
  OnLoop([] {});
  for (const absl::Status& status : results) EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(channel_->batches(), std::vector<size_t>{3})
      << "one loop task takes everything queued by then";
  EXPECT_TRUE(channel_->on_loop());
}

TEST_F(OpInboxTest, OpsPostedOnTheLoopStartAtOnce) {
  std::vector<absl::Status> results(2, absl::UnknownError("not run"));
  OnLoop([&] {
    std::vector<RemoteOp> ops;
    ops.push_back(OpInto(&results, 0));
    ops.push_back(OpInto(&results, 1));
    inbox_.Post(channel_, *loop_, absl::MakeSpan(ops));
    // Started inside Post, not by a later task.
    EXPECT_TRUE(results[0].ok());
    EXPECT_TRUE(results[1].ok());
  });
  EXPECT_EQ(channel_->batches(), std::vector<size_t>{2});
}

TEST_F(OpInboxTest, AClosedInboxFailsNewOpsAndHandsBackQueuedOnes) {
  std::vector<absl::Status> results(2, absl::UnknownError("not run"));
  absl::Notification release;
  ASSERT_TRUE(loop_->Post([&] { release.WaitForNotification(); }));
  RemoteOp queued = OpInto(&results, 0);
  inbox_.Post(channel_, *loop_, absl::MakeSpan(&queued, 1));
  EXPECT_TRUE(inbox_.Close());
  EXPECT_FALSE(inbox_.Close()) << "closing twice";
  EXPECT_TRUE(inbox_.closed());
  RemoteOp late = OpInto(&results, 1);
  inbox_.Post(channel_, *loop_, absl::MakeSpan(&late, 1));
  EXPECT_EQ(results[1].code(), absl::StatusCode::kUnavailable) << results[1];
  // What a teardown takes before the loop task runs is not started again.
  std::vector<RemoteOp> left = inbox_.TakeAll();
  ASSERT_EQ(left.size(), 1u);
  left[0].done(absl::CancelledError("torn down"));
  release.Notify();
  OnLoop([] {});
  EXPECT_EQ(results[0].code(), absl::StatusCode::kCancelled);
  for (size_t batch : channel_->batches()) EXPECT_EQ(batch, 0u);
}

}  // namespace
}  // namespace rdmad::transport
