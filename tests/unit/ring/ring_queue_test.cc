// The daemon's side of a client queue (daemon/ring/ring_queue.h) and the
// decoding of submission entries (ring_decoder.h): completion slots are
// reserved when submissions are taken, a client that corrupts the ring
// stops its queue (and only it), notifications take only the room the
// queue's own operations leave and wait in order for more, and every
// malformed entry gets its precise status.
#include "daemon/ring/ring_queue.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "daemon/ring/ring_decoder.h"
#include "daemon/runtime/turn_batch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/callers.h"

namespace rdmad::ring {
namespace {

using core::testing::kAlice;

using ::testing::HasSubstr;

class RingQueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RingQueueOptions options;
    options.submission_entries = 8;
    options.completion_entries = 8;
    options.notifications = true;
    auto queue = RingQueue::Create(1, kAlice, std::make_shared<RemoteHandles>(),
                                   options);
    ASSERT_TRUE(queue.ok()) << queue.status();
    queue_ = *queue;
    queue_->HoldNotifications(NotificationBacklog(budget_));
    // The client's mapping of the same memfd.
    client_ = ::mmap(nullptr, queue_->segment_size(), PROT_READ | PROT_WRITE,
                     MAP_SHARED, queue_->segment_fd(), 0);
    ASSERT_NE(client_, MAP_FAILED);
    ASSERT_TRUE(queue::CheckSegment(client_, queue_->segment_size()).ok());
    producer_.emplace(client_);
  }
  void TearDown() override { ::munmap(client_, queue_->segment_size()); }

  queue::QueueHeader* header() {
    return static_cast<queue::QueueHeader*>(client_);
  }
  void Submit(int n) {
    for (int i = 0; i < n; ++i) {
      queue::SubmissionEntry e{};
      e.tag = next_tag_++;
      producer_->Push(e);
    }
    producer_->Publish();
  }
  // Completions published so far: the highest sequence in the ring (the
  // position of the last one plus one; 0 before the first).
  uint64_t Published() {
    const auto* ring = reinterpret_cast<const queue::CompletionEntry*>(
        static_cast<const char*>(client_) + queue_->geometry().cq_offset);
    uint64_t most = 0;
    for (uint32_t i = 0; i < queue_->geometry().cq_entries; ++i) {
      most = std::max(most, ring[i].sequence);
    }
    return most;
  }
  queue::SubmissionEntry* SubmissionSlot(uint32_t position) {
    auto* ring = reinterpret_cast<queue::SubmissionEntry*>(
        static_cast<char*>(client_) + queue_->geometry().sq_offset);
    return &ring[position & (queue_->geometry().sq_entries - 1)];
  }

  // A notification from `writer` (null: a local writer of uid 1001).
  static PendingNotification Note(uint32_t immediate,
                                  const char* writer = nullptr) {
    PendingNotification n;
    n.sequence = immediate;
    n.region = 9;
    n.offset = immediate * 64;
    n.length = 64;
    n.immediate = immediate;
    if (writer == nullptr) {
      n.transport = core::TransportKind::kLocal;
      n.writer_uid = 1001;
      n.writer = std::make_shared<const std::string>("127.0.0.1:7471");
    } else {
      n.transport = core::TransportKind::kTcp;
      n.writer = std::make_shared<const std::string>(writer);
    }
    return n;
  }
  // As the registry delivers: Notify, and the wake-up it asks for.
  void Deliver(const PendingNotification& n) {
    if (queue_->Notify(n)) queue_->WakeClient();
  }
  // Polls everything published; notifications as their immediates, a loss
  // as minus its count, a completion as 1000 + its tag.
  std::vector<int64_t> PollAll(queue::CompletionConsumer& reaper) {
    std::vector<int64_t> out;
    queue::CompletionEntry done[8];
    size_t n;
    while ((n = reaper.Poll(absl::MakeSpan(done))) > 0) {
      for (size_t i = 0; i < n; ++i) {
        switch (static_cast<queue::CompletionKind>(done[i].kind)) {
          case queue::CompletionKind::kNotification:
            out.push_back(done[i].immediate);
            break;
          case queue::CompletionKind::kNotificationsLost:
            out.push_back(-static_cast<int64_t>(done[i].bytes));
            break;
          case queue::CompletionKind::kCompletion:
            out.push_back(1000 + static_cast<int64_t>(done[i].tag));
            break;
        }
      }
    }
    return out;
  }

  // Alice's uid may hold six notifications.
  std::shared_ptr<NotificationBudget> budget_ =
      std::make_shared<NotificationBudget>(kAlice.uid, 6);
  std::shared_ptr<RingQueue> queue_;
  void* client_ = nullptr;
  std::optional<queue::SubmissionProducer> producer_;
  uint64_t next_tag_ = 1;
};

TEST_F(RingQueueTest, TakingReservesACompletionSlot) {
  Submit(8);
  queue::SubmissionEntry out[16];
  EXPECT_EQ(queue_->Take(absl::MakeSpan(out)), 8u);
  EXPECT_EQ(queue_->in_flight(), 8u);
  Submit(4);
  EXPECT_EQ(queue_->Take(absl::MakeSpan(out)), 0u)
      << "no completion slot free: the submissions wait in their ring";
  queue_->Complete(1, absl::OkStatus(), 8, core::TransportKind::kTcp);
  queue_->Complete(2, absl::NotFoundError("gone"), 0,
                   core::TransportKind::kNone);
  // Published, but not yet consumed by the client: still no room.
  EXPECT_EQ(queue_->Take(absl::MakeSpan(out)), 0u);
  queue::CompletionConsumer reaper(client_);
  queue::CompletionEntry done[8];
  std::string messages[8];
  ASSERT_EQ(reaper.Poll(absl::MakeSpan(done), messages), 2u);
  EXPECT_EQ(done[0].tag, 1u);
  EXPECT_EQ(queue::CompletionTransportOf(done[0].transport),
            queue::CompletionTransport::kTcp);
  EXPECT_EQ(done[1].code, static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_EQ(queue::CompletionTransportOf(done[1].transport),
            queue::CompletionTransport::kUnknown);
  EXPECT_EQ(messages[1], "gone");
  EXPECT_EQ(queue_->Take(absl::MakeSpan(out)), 2u);
  EXPECT_FALSE(queue_->stopped());
}

TEST_F(RingQueueTest, ACorruptSequenceStopsTheQueueWithAPreciseStatus) {
  SubmissionSlot(0)->sequence = 12345;
  queue::SubmissionEntry out[8];
  EXPECT_EQ(queue_->Take(absl::MakeSpan(out)), 0u);
  EXPECT_TRUE(queue_->stopped());
  const absl::Status s = queue::StopStatus(client_);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("submission ring's entry 0"));
  // Stopped for good, whatever the client does next.
  Submit(1);
  EXPECT_EQ(queue_->Take(absl::MakeSpan(out)), 0u);
}

TEST_F(RingQueueTest, ALyingCompletionHeadStopsTheQueue) {
  // The daemon reads the client's head only when the head it saw last
  // leaves too little room (a cache line the client's core wrote): it goes
  // on within the slots it knows are free, never past them, and catches
  // the lie at the next read.
  Submit(1);
  queue::SubmissionEntry out[8];
  ASSERT_EQ(queue_->Take(absl::MakeSpan(out)), 1u);
  header()->cq_head.store(500);
  queue_->Complete(1, absl::OkStatus(), 1, core::TransportKind::kLocal);
  // Seven slots are known free: the next round takes its entry without
  // reading the head (a round never asks for more room than one entry
  // beyond those in flight, whatever its budget).
  Submit(1);
  ASSERT_EQ(queue_->Take(absl::MakeSpan(out)), 1u);
  EXPECT_FALSE(queue_->stopped());
  queue_->Complete(out[0].tag, absl::OkStatus(), 1, core::TransportKind::kLocal);
  for (int i = 0; i < 16 && !queue_->stopped(); ++i) {
    Submit(1);
    for (size_t n = queue_->Take(absl::MakeSpan(out)); n > 0; --n) {
      queue_->Complete(out[n - 1].tag, absl::OkStatus(), 1,
                       core::TransportKind::kLocal);
    }
  }
  EXPECT_TRUE(queue_->stopped());
  EXPECT_EQ(queue::StopStatus(client_).code(), absl::StatusCode::kDataLoss);
  EXPECT_LE(Published(), 8u)
      << "nothing written past the slots the last honest head freed";
}

TEST_F(RingQueueTest, CompletionsOfARoundArePublishedAtItsEnd) {
  Submit(3);
  queue::SubmissionEntry out[8];
  ASSERT_EQ(queue_->Take(absl::MakeSpan(out)), 3u);
  queue_->BeginRound();
  queue_->Complete(out[0].tag, absl::OkStatus(), 8, core::TransportKind::kLocal);
  queue_->Complete(out[1].tag, absl::NotFoundError("no such region"), 0,
                   core::TransportKind::kNone);
  EXPECT_EQ(Published(), 0u) << "kept until the round ends";
  // Another thread's completion (a remote transfer's) is published at once.
  std::thread([&] {
    queue_->Complete(out[2].tag, absl::OkStatus(), 4, core::TransportKind::kTcp);
  }).join();
  EXPECT_EQ(Published(), 1u);
  queue_->EndRound();
  EXPECT_EQ(Published(), 3u);
  EXPECT_EQ(queue_->in_flight(), 0u);
  queue::CompletionConsumer reaper(client_);
  queue::CompletionEntry done[8];
  std::string messages[8];
  ASSERT_EQ(reaper.Poll(absl::MakeSpan(done), messages), 3u);
  EXPECT_EQ(done[0].tag, out[2].tag);
  EXPECT_EQ(done[0].bytes, 4u);
  EXPECT_EQ(done[1].tag, out[0].tag);
  EXPECT_EQ(done[1].bytes, 8u);
  EXPECT_EQ(done[2].tag, out[1].tag);
  EXPECT_EQ(done[2].code, static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_EQ(messages[2], "no such region");
  // After the round, completions of this thread go out at once again.
  Submit(1);
  ASSERT_EQ(queue_->Take(absl::MakeSpan(out)), 1u);
  queue_->Complete(out[0].tag, absl::OkStatus(), 1, core::TransportKind::kLocal);
  EXPECT_EQ(Published(), 4u);
}

TEST_F(RingQueueTest, CompletionsOfAnEventLoopTurnWakeTheClientOnce) {
  Submit(3);
  queue::SubmissionEntry out[8];
  ASSERT_EQ(queue_->Take(absl::MakeSpan(out)), 3u);
  queue::CompletionConsumer reaper(client_);
  ASSERT_FALSE(reaper.WaitUnlessReady()) << "nothing to reap: it sleeps";
  {
    // What an event loop's turn opens around its callbacks (remote
    // completions arriving together on one socket).
    runtime::TurnBatch::Scope turn;
    for (int i = 0; i < 3; ++i) {
      queue_->Complete(out[i].tag, absl::OkStatus(), 8,
                       core::TransportKind::kTcp);
    }
    EXPECT_EQ(Published(), 0u) << "kept until the turn ends";
    EXPECT_EQ(queue_->stats().client_wakeups, 0u);
  }
  EXPECT_EQ(Published(), 3u);
  EXPECT_EQ(queue_->stats().client_wakeups, 1u) << "one wake-up for three";
  pollfd p{queue_->wakeup_fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 0), 1);
  uint64_t count = 0;
  ASSERT_EQ(::read(queue_->wakeup_fd(), &count, sizeof(count)),
            static_cast<ssize_t>(sizeof(count)));
  EXPECT_EQ(count, 1u);
  reaper.Done();
  queue::CompletionEntry done[8];
  std::string messages[8];
  ASSERT_EQ(reaper.Poll(absl::MakeSpan(done), messages), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(done[i].tag, out[i].tag);
  // Outside a turn, a completion is published at once.
  Submit(1);
  ASSERT_EQ(queue_->Take(absl::MakeSpan(out)), 1u);
  queue_->Complete(out[0].tag, absl::OkStatus(), 1, core::TransportKind::kTcp);
  EXPECT_EQ(Published(), 4u);
  // The client slept on this thread's CPU: the publish left this thread a
  // hint to yield, which is not this test's subject.
  RingQueue::TakeYieldHint();
}

TEST_F(RingQueueTest, CompletingForAClientWaitingOnThisCpuAsksToYield) {
  // Keep this thread on one CPU so that the hints compare equal.
  cpu_set_t saved, one;
  ASSERT_EQ(::pthread_getaffinity_np(::pthread_self(), sizeof(saved), &saved),
            0);
  CPU_ZERO(&one);
  CPU_SET(::sched_getcpu(), &one);
  ASSERT_EQ(::pthread_setaffinity_np(::pthread_self(), sizeof(one), &one), 0);
  const int cpu = ::sched_getcpu();

  queue::CompletionConsumer reaper(client_);
  queue::SubmissionEntry out[8];
  auto complete_one = [&] {
    Submit(1);
    ASSERT_EQ(queue_->Take(absl::MakeSpan(out)), 1u);
    queue_->Complete(out[0].tag, absl::OkStatus(), 1,
                     core::TransportKind::kLocal);
    queue::CompletionEntry done[8];
    ASSERT_EQ(reaper.Poll(absl::MakeSpan(done)), 1u);
  };
  using Hint = RingQueue::YieldHint;
  EXPECT_EQ(RingQueue::TakeYieldHint(), Hint::kNone);
  // The client is awake (busy): no wake-up, nothing to yield.
  complete_one();
  EXPECT_EQ(RingQueue::TakeYieldHint(), Hint::kNone);
  // Asleep on another CPU: woken, but it runs elsewhere.
  ASSERT_FALSE(reaper.WaitUnlessReady());
  header()->client_cpu.store(cpu + 2);  // another CPU, plus one
  complete_one();
  EXPECT_EQ(RingQueue::TakeYieldHint(), Hint::kNone);
  // Asleep on this CPU: yield to it, once.
  ASSERT_FALSE(reaper.WaitUnlessReady());
  complete_one();
  EXPECT_EQ(RingQueue::TakeYieldHint(), Hint::kToSleeper);
  EXPECT_EQ(RingQueue::TakeYieldHint(), Hint::kNone);
  reaper.Done();
  // Woken and awake again: nothing to yield to.
  complete_one();
  EXPECT_EQ(RingQueue::TakeYieldHint(), Hint::kNone);
  // Polling between yields on this CPU (not asleep: no wake-up written).
  reaper.Yielding();
  const uint64_t wakeups = queue_->stats().client_wakeups;
  complete_one();
  EXPECT_EQ(RingQueue::TakeYieldHint(), Hint::kToYielder);
  EXPECT_EQ(queue_->stats().client_wakeups, wakeups);
  // Busy-polling (so on another CPU): nothing to yield.
  reaper.NotWaiting();
  complete_one();
  EXPECT_EQ(RingQueue::TakeYieldHint(), Hint::kNone);
  queue_->SetEngineCpu(cpu);
  EXPECT_TRUE(queue::EngineRunsHere(client_));
  ASSERT_EQ(::pthread_setaffinity_np(::pthread_self(), sizeof(saved), &saved),
            0);
}

// A receiver that does not poll: half the ring is notifications, the rest
// waits in the backlog, what passes the budget is counted, and everything
// arrives in order as the client frees room. Nothing stops the queue.
TEST_F(RingQueueTest, NotificationsWaitForRoomInOrderAndNeverStopTheQueue) {
  for (uint32_t i = 1; i <= 13; ++i) Deliver(Note(i));
  EXPECT_FALSE(queue_->stopped());
  EXPECT_EQ(Published(), 4u) << "at most half of the 8-entry ring";
  RingQueueStats s = queue_->stats();
  EXPECT_EQ(s.notified, 4u);
  EXPECT_EQ(s.held, 6u) << "the budget";
  EXPECT_EQ(s.lost, 3u);
  EXPECT_EQ(budget_->lost(), 3u);
  EXPECT_EQ(header()->notifications_held.load(), 7u)
      << "six notifications and the count of the lost, in the header";
  EXPECT_TRUE(queue_->holds_notifications());
  EXPECT_FALSE(queue_->DeliverHeld()) << "no room freed yet";

  queue::CompletionConsumer reaper(client_);
  std::vector<int64_t> got = PollAll(reaper);
  while (queue_->DeliverHeld()) {
    std::vector<int64_t> more = PollAll(reaper);
    got.insert(got.end(), more.begin(), more.end());
  }
  EXPECT_EQ(got, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -3}));
  EXPECT_FALSE(queue_->holds_notifications());
  EXPECT_EQ(header()->notifications_held.load(), 0u);
  EXPECT_EQ(budget_->held(), 0u);
  // Room again: the next goes straight to the ring.
  Deliver(Note(14));
  EXPECT_EQ(PollAll(reaper), (std::vector<int64_t>{14}));
  EXPECT_FALSE(queue_->stopped());
}

TEST_F(RingQueueTest, ANotificationSaysWhoWrote) {
  Deliver(Note(1));
  Deliver(Note(2, "10.0.0.2:7471"));
  queue::CompletionConsumer reaper(client_);
  queue::CompletionEntry done[4];
  std::string messages[4];
  ASSERT_EQ(reaper.Poll(absl::MakeSpan(done), messages), 2u);
  EXPECT_EQ(done[0].kind,
            static_cast<uint8_t>(queue::CompletionKind::kNotification));
  EXPECT_EQ(done[0].region, 9u);
  EXPECT_EQ(done[0].offset, 64u);
  EXPECT_EQ(done[0].bytes, 64u);
  EXPECT_EQ(done[0].tag, 1001u) << "the local writer's uid";
  EXPECT_EQ(queue::CompletionTransportOf(done[0].transport),
            queue::CompletionTransport::kLocal);
  EXPECT_EQ(messages[0], "127.0.0.1:7471");
  EXPECT_EQ(done[1].tag, queue::kNoWriterUid);
  EXPECT_EQ(queue::CompletionTransportOf(done[1].transport),
            queue::CompletionTransport::kTcp);
  EXPECT_EQ(messages[1], "10.0.0.2:7471");
}

TEST_F(RingQueueTest, StatsCountWhatWentThroughAndWhyItStopped) {
  const absl::Time before = absl::Now();
  queue::CompletionConsumer reaper(client_);
  queue::SubmissionEntry out[8];
  queue::CompletionEntry done[8];
  Submit(3);
  ASSERT_EQ(queue_->Take(absl::MakeSpan(out)), 3u);
  RingQueueStats s = queue_->stats();
  EXPECT_EQ(s.submitted, 3u);
  EXPECT_EQ(s.in_flight, 3u);
  EXPECT_EQ(s.completed, 0u);
  EXPECT_LE(s.opened, before);
  queue_->Complete(out[0].tag, absl::OkStatus(), 8, core::TransportKind::kTcp);
  // The client sleeps: this completion has to wake it.
  ASSERT_EQ(reaper.Poll(absl::MakeSpan(done)), 1u);
  ASSERT_FALSE(reaper.WaitUnlessReady());
  queue_->Complete(out[1].tag, absl::NotFoundError("gone"), 0,
                   core::TransportKind::kNone);
  reaper.Done();
  queue_->Complete(out[2].tag, absl::OkStatus(), 8, core::TransportKind::kTcp);
  Deliver(Note(5));
  queue_->ClearDoorbell();
  s = queue_->stats();
  EXPECT_EQ(s.submitted, 3u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.completed, 3u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.notified, 1u);
  EXPECT_EQ(s.client_wakeups, 1u) << "only the client asleep was woken";
  EXPECT_EQ(s.doorbells, 1u);
  EXPECT_TRUE(s.stop_reason.ok());
  // A corrupt entry stops it; the reason stays for ListQueues.
  SubmissionSlot(3)->sequence = 777;
  EXPECT_EQ(queue_->Take(absl::MakeSpan(out)), 0u);
  s = queue_->stats();
  EXPECT_EQ(s.stop_reason.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.stop_reason, queue::StopStatus(client_))
      << "the reason the client reads in its header";
  // A later Stop does not replace the first reason.
  queue_->Stop(absl::CancelledError("the queue was closed"));
  EXPECT_EQ(queue_->stats().stop_reason.code(), absl::StatusCode::kDataLoss);
}

TEST_F(RingQueueTest, NotificationsNeverTakeReservedSlots) {
  Submit(7);
  queue::SubmissionEntry out[8];
  ASSERT_EQ(queue_->Take(absl::MakeSpan(out)), 7u);
  Deliver(Note(1));  // one slot free: the operations' half
  EXPECT_EQ(Published(), 0u);
  EXPECT_EQ(queue_->stats().held, 1u);
  for (int i = 1; i <= 7; ++i) {
    queue_->Complete(i, absl::OkStatus(), 1, core::TransportKind::kLocal);
  }
  EXPECT_EQ(Published(), 7u) << "every reserved slot delivered";
  queue::CompletionConsumer reaper(client_);
  EXPECT_EQ(PollAll(reaper),
            (std::vector<int64_t>{1001, 1002, 1003, 1004, 1005, 1006, 1007}));
  EXPECT_TRUE(queue_->DeliverHeld());
  EXPECT_EQ(PollAll(reaper), (std::vector<int64_t>{1}));
  EXPECT_FALSE(queue_->stopped());
}

// Whoever writes, the owner's own operations keep half the ring: a burst
// of notifications nobody polls does not hold back its submissions.
TEST_F(RingQueueTest, AWriterCannotTakeTheOwnersOperationsSlots) {
  for (uint32_t i = 1; i <= 65; ++i) Deliver(Note(i));
  Submit(6);
  queue::SubmissionEntry out[8];
  EXPECT_EQ(queue_->Take(absl::MakeSpan(out)), 4u)
      << "the half of the ring the notifications left";
  for (int i = 1; i <= 4; ++i) {
    queue_->Complete(i, absl::OkStatus(), 1, core::TransportKind::kLocal);
  }
  EXPECT_EQ(Published(), 8u);
  EXPECT_FALSE(queue_->stopped());
}

// A stopped queue (its client broke the ring) still takes notifications:
// held for the owner's next queue, which the registry gives them to.
TEST_F(RingQueueTest, AStoppedQueueHoldsNotificationsForTheNextOne) {
  queue_->Stop(absl::DataLossError("scribbled"));
  Deliver(Note(1));
  Deliver(Note(2));
  EXPECT_FALSE(queue_->DeliverHeld());
  EXPECT_EQ(Published(), 0u);
  NotificationBacklog left = queue_->TakeBacklog();
  EXPECT_EQ(left.held(), 2u);
  EXPECT_FALSE(queue_->holds_notifications());
  EXPECT_EQ(header()->notifications_held.load(), 0u);
}

// The client library rings the doorbell after freeing room only while the
// daemon holds notifications for it and the engine sleeps.
TEST_F(RingQueueTest, HeldNotificationsAskForTheDoorbell) {
  header()->engine_sleeping.store(1);
  EXPECT_FALSE(queue::HeldNotificationsWantDoorbell(client_));
  for (uint32_t i = 1; i <= 5; ++i) Deliver(Note(i));
  EXPECT_TRUE(queue::HeldNotificationsWantDoorbell(client_));
  header()->engine_sleeping.store(0);
  EXPECT_FALSE(queue::HeldNotificationsWantDoorbell(client_))
      << "an engine awake finds them itself";
}

// --- decoding ----------------------------------------------------------------

class RingDecoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RemoteHandle h;
    h.target.peer = "10.0.0.2:7471";
    h.target.name = "kv";
    h.size = 4096;
    h.access = core::RemoteAccess::kRead;
    auto added = handles_.Add(h);
    ASSERT_TRUE(added.ok());
    handle_ = (*added)->id;
  }
  queue::SubmissionEntry Good() {
    queue::SubmissionEntry e{};
    e.op = static_cast<uint8_t>(queue::OpCode::kRead);
    e.tag = 77;
    e.local_region = 3;
    e.local_offset = 10;
    e.remote_handle = handle_;
    e.remote_offset = 100;
    e.length = 50;
    return e;
  }
  absl::StatusOr<core::TransferSpec> Decode(const queue::SubmissionEntry& e) {
    return DecodeSubmission(e, handles_, absl::FromUnixSeconds(1000),
                            absl::Seconds(30));
  }

  RemoteHandles handles_;
  uint64_t handle_ = 0;
};

TEST_F(RingDecoderTest, AGoodEntryBecomesTheSpecTheGrpcPathMakes) {
  queue::SubmissionEntry e = Good();
  e.timeout_ms = 1500;
  auto spec = Decode(e);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->op, core::OpType::kRead);
  EXPECT_EQ(spec->local.id, 3u);
  EXPECT_EQ(spec->local_offset, 10u);
  EXPECT_EQ(spec->length, 50u);
  EXPECT_EQ(spec->remote.peer, "10.0.0.2:7471");
  EXPECT_EQ(spec->remote.name, "kv");
  EXPECT_EQ(spec->remote.offset, 100u);
  EXPECT_EQ(spec->deadline, absl::FromUnixSeconds(1000) + absl::Milliseconds(1500));
  EXPECT_FALSE(spec->immediate.has_value());
  e.timeout_ms = 0;
  EXPECT_EQ(Decode(e)->deadline, absl::FromUnixSeconds(1030));
  e.timeout_ms = 0xffffffff;  // clamped to an hour
  EXPECT_EQ(Decode(e)->deadline, absl::FromUnixSeconds(1000 + 3600));
}

TEST_F(RingDecoderTest, EveryMalformedFieldHasItsCode) {
  struct Case {
    const char* what;
    void (*spoil)(queue::SubmissionEntry&);
    absl::StatusCode code;
  };
  const Case cases[] = {
      {"op 0", [](auto& e) { e.op = 0; }, absl::StatusCode::kInvalidArgument},
      {"op 3", [](auto& e) { e.op = 3; }, absl::StatusCode::kInvalidArgument},
      {"op 255", [](auto& e) { e.op = 255; }, absl::StatusCode::kInvalidArgument},
      {"unknown flag", [](auto& e) { e.flags = 0x80; },
       absl::StatusCode::kInvalidArgument},
      {"reserved0", [](auto& e) { e.reserved0 = 1; },
       absl::StatusCode::kInvalidArgument},
      {"immediate on a READ", [](auto& e) { e.flags = queue::kFlagImmediate; },
       absl::StatusCode::kInvalidArgument},
      {"length 0", [](auto& e) { e.length = 0; },
       absl::StatusCode::kInvalidArgument},
      {"no local region", [](auto& e) { e.local_region = 0; },
       absl::StatusCode::kInvalidArgument},
      {"unknown handle", [](auto& e) { e.remote_handle = 999; },
       absl::StatusCode::kNotFound},
      {"handle 0", [](auto& e) { e.remote_handle = 0; },
       absl::StatusCode::kNotFound},
  };
  for (const Case& c : cases) {
    queue::SubmissionEntry e = Good();
    c.spoil(e);
    EXPECT_EQ(Decode(e).status().code(), c.code) << c.what;
  }
}

TEST_F(RingDecoderTest, TheFastChecksAndTheirExplanationAgree) {
  // DecodeEntry checks inline and asks DescribeBadEntry what is wrong only
  // once a check failed: every entry either decodes or is explained, none
  // is "failed an unknown check". Fields are drawn from values near each
  // check's edge, in every combination a fixed seed gives.
  std::mt19937_64 random(14);
  const uint8_t ops[] = {0, 1, 2, 3, 255};
  const uint8_t flags[] = {0, queue::kFlagImmediate, 0x80, 0x81};
  for (int i = 0; i < 20000; ++i) {
    queue::SubmissionEntry e = Good();
    e.op = ops[random() % 5];
    e.flags = flags[random() % 4];
    e.reserved0 = random() % 4 == 0 ? 1 : 0;
    e.length = random() % 3;
    e.local_region = random() % 3;
    e.remote_handle = random() % 3 == 0 ? handle_ + random() % 3 : handle_;
    const absl::Status s = Decode(e).status();
    ASSERT_FALSE(absl::IsInternal(s)) << s << " for op " << int{e.op};
    // And what passes the fast checks, the explanation finds nothing in.
    if (s.ok()) {
      const std::shared_ptr<const RemoteHandle> h =
          handles_.Find(e.remote_handle);
      ASSERT_TRUE(absl::IsInternal(DescribeBadEntry(e, h.get())))
          << "op " << int{e.op} << " flags " << int{e.flags} << " length "
          << e.length << " local " << e.local_region;
    }
  }
}

TEST_F(RingDecoderTest, AWriteMayCarryAnImmediate) {
  queue::SubmissionEntry e = Good();
  e.op = static_cast<uint8_t>(queue::OpCode::kWrite);
  e.flags = queue::kFlagImmediate;
  e.immediate = 0xabcd;
  auto spec = Decode(e);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(spec->immediate.has_value());
  EXPECT_EQ(*spec->immediate, 0xabcdu);
}

}  // namespace
}  // namespace rdmad::ring
