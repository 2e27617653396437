// QueueRegistry (daemon/ring/queue_registry.h): queues and handles are made
// only for sessions the session table has open — a call that passed its
// session check just before the session ended leaves nothing behind — and
// a session's limits (queues per session, one notification queue) hold
// against calls racing each other, and notifications reach their owners'
// queues in order, are held for owners without one, and are bounded per
// uid.
#include "daemon/ring/queue_registry.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "common/queue_layout.h"
#include "common/queue_ring.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/core/region_table.h"
#include "daemon/core/session_table.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/runtime/io_runtime.h"
#include "gtest/gtest.h"

namespace rdmad::ring {
namespace {

// Fails every remote transfer at once; these tests move no data.
class NoRemote final : public core::RemoteTransfers {
 public:
  void SubmitBatch(absl::Span<core::Transfer> transfers) override {
    for (core::Transfer& t : transfers) {
      std::move(t.done)(absl::UnavailableError("no peers in this test"));
    }
  }
};

class QueueRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime::IoRuntimeOptions options;
    options.threads = 1;
    options.engine_threads = 1;
    options.name = "registry-test";
    auto runtime = runtime::IoRuntime::Start(options);
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    runtime_ = *std::move(runtime);
    registry_ = std::make_unique<QueueRegistry>(runtime_.get(), &transfers_,
                                                &sessions_, &regions_);
  }
  void TearDown() override {
    registry_.reset();
    runtime_.reset();
  }

  core::Caller Open() {
    core::SessionTable::Opened opened = sessions_.Open(1000, 1000, 42);
    return core::Caller{opened.id, 1000, 1000, 42, {}};
  }
  // A daemon-owned region "inbox" of `owner`'s uid.
  std::shared_ptr<core::Region> Inbox(const core::Caller& owner) {
    core::AllocateOptions named;
    named.size = 4096;
    named.name = "inbox";
    named.daemon_owned = true;
    auto inbox = regions_.Allocate(owner, named);
    EXPECT_TRUE(inbox.ok()) << inbox.status();
    return inbox.ok() ? *inbox : nullptr;
  }

  core::NullRegistrar registrar_;
  core::RegionTable regions_{&registrar_, core::RegionLimits{}};
  NoRemote remote_;
  core::TransferEngine transfers_{&regions_, &remote_};
  core::SessionTable sessions_;
  std::unique_ptr<runtime::IoRuntime> runtime_;
  std::unique_ptr<QueueRegistry> registry_;
};

RingQueueOptions Small(bool notifications = false) {
  RingQueueOptions options;
  options.submission_entries = 8;
  options.completion_entries = 16;
  options.notifications = notifications;
  return options;
}

// A client's view of a queue's completion ring.
class Reader {
 public:
  explicit Reader(const RingQueue& queue) : size_(queue.segment_size()) {
    base_ = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED,
                   queue.segment_fd(), 0);
    EXPECT_NE(base_, MAP_FAILED);
    consumer_.emplace(base_);
  }
  ~Reader() { ::munmap(base_, size_); }

  // What the ring holds now: a notification as its immediate, a loss as
  // minus its count; the writer's address of the last notification in
  // `writer`.
  std::vector<int64_t> Poll() {
    std::vector<int64_t> out;
    queue::CompletionEntry done[16];
    std::string messages[16];
    size_t n;
    while ((n = consumer_->Poll(absl::MakeSpan(done), messages)) > 0) {
      for (size_t i = 0; i < n; ++i) {
        if (done[i].kind ==
            static_cast<uint8_t>(queue::CompletionKind::kNotificationsLost)) {
          out.push_back(-static_cast<int64_t>(done[i].bytes));
        } else {
          out.push_back(done[i].immediate);
          writer = messages[i];
          writer_uid = done[i].tag;
        }
      }
    }
    return out;
  }
  // Polls until `want` entries came (the engine moves held ones in as room
  // is freed), or 10 s passed.
  std::vector<int64_t> PollUntil(size_t want) {
    std::vector<int64_t> out;
    const absl::Time end = absl::Now() + absl::Seconds(10);
    while (out.size() < want && absl::Now() < end) {
      std::vector<int64_t> more = Poll();
      out.insert(out.end(), more.begin(), more.end());
      if (more.empty()) absl::SleepFor(absl::Milliseconds(1));
    }
    return out;
  }

  std::string writer;
  uint64_t writer_uid = 0;

 private:
  const size_t size_;
  void* base_ = nullptr;
  std::optional<queue::CompletionConsumer> consumer_;
};

void Notify(QueueRegistry& registry, const core::Region& region,
            uint32_t immediate, uint32_t writer_uid = 1001) {
  registry.Notify(region, 0, 8, immediate,
                  core::NotificationWriter{.uid = writer_uid});
}

TEST_F(QueueRegistryTest, NothingIsMadeForASessionThatHasEnded) {
  const core::Caller caller = Open();
  auto queue = registry_->Open(caller, Small());
  ASSERT_TRUE(queue.ok()) << queue.status();
  ASSERT_TRUE(registry_->HandlesOf(caller.session_id).ok());

  // What the session server does at a session's end, with a call that
  // had already passed its session check arriving after the table closed
  // the session and before the registry ended it.
  ASSERT_TRUE(sessions_.Close(caller.session_id));
  auto late = registry_->Open(caller, Small());
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(late.status().message().find("has ended"),
            absl::string_view::npos)
      << late.status();
  auto handles = registry_->HandlesOf(caller.session_id);
  EXPECT_EQ(handles.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(registry_->queue_count(), 1u);  // the first, until EndSession

  registry_->EndSession(caller.session_id);
  EXPECT_EQ(registry_->queue_count(), 0u);
  EXPECT_TRUE((*queue)->stopped());
  // And a call arriving after EndSession recreates nothing either.
  EXPECT_FALSE(registry_->Open(caller, Small()).ok());
  EXPECT_FALSE(registry_->HandlesOf(caller.session_id).ok());
  EXPECT_EQ(registry_->queue_count(), 0u);
}

TEST_F(QueueRegistryTest, ADescriptorKeepsItsQueueOpenUntilSent) {
  const core::Caller caller = Open();
  auto queue = registry_->Open(caller, Small());
  ASSERT_TRUE(queue.ok()) << queue.status();
  const uint64_t id = (*queue)->id();
  const int segment_fd = (*queue)->segment_fd();
  queue->reset();
  auto found = registry_->Descriptor(caller.session_id, id, QueueFd::kSegment);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->fd, segment_fd);
  EXPECT_GT(found->size, 0u);
  // Closed before the descriptor is sent: the descriptor's holder keeps
  // the queue, so the number still names its segment, not a reused one.
  ASSERT_TRUE(registry_->Close(caller.session_id, id).ok());
  EXPECT_EQ(found->queue->segment_fd(), segment_fd);
  EXPECT_GE(::fcntl(found->fd, F_GETFD), 0);
  EXPECT_EQ(registry_->Descriptor(caller.session_id, id, QueueFd::kSegment)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST_F(QueueRegistryTest, LimitsHoldAgainstCallsRacingEachOther) {
  const core::Caller caller = Open();
  constexpr int kThreads = 8;
  constexpr int kPerThread = 12;  // 96 attempts for 64 places
  std::atomic<int> opened{0};
  std::atomic<int> notification_queues{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const bool notifications = i == 0;
        auto queue = registry_->Open(caller, Small(notifications));
        if (!queue.ok()) {
          const absl::StatusCode code = queue.status().code();
          EXPECT_TRUE(code == absl::StatusCode::kResourceExhausted ||
                      code == absl::StatusCode::kFailedPrecondition)
              << "thread " << t << ": " << queue.status();
          continue;
        }
        opened.fetch_add(1);
        if (notifications) notification_queues.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(opened.load(), static_cast<int>(QueueRegistry::kMaxQueuesPerSession));
  EXPECT_EQ(notification_queues.load(), 1);
  EXPECT_EQ(registry_->queue_count(), QueueRegistry::kMaxQueuesPerSession);
  registry_->EndSession(caller.session_id);
  EXPECT_EQ(registry_->queue_count(), 0u);
}

TEST_F(QueueRegistryTest, SegmentsCountAgainstTheUidsMemoryQuota) {
  const uint64_t segment =
      queue::GeometryFor(Small().submission_entries,
                         Small().completion_entries)
          .total_size;
  core::RegionLimits limits;
  limits.max_pinned_bytes_per_uid = 3 * segment;
  core::RegionTable regions(&registrar_, limits);
  QueueRegistry registry(runtime_.get(), &transfers_, &sessions_, &regions);
  const core::Caller caller = Open();

  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto queue = registry.Open(caller, Small());
    ASSERT_TRUE(queue.ok()) << queue.status();
    ids.push_back((*queue)->id());
  }
  EXPECT_EQ(regions.UsageOf(caller.uid).pinned_bytes, 3 * segment);
  auto over = registry.Open(caller, Small());
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("quota_pinned_bytes_per_uid"),
            absl::string_view::npos)
      << over.status();
  EXPECT_NE(over.status().message().find("a queue of"),
            absl::string_view::npos)
      << over.status();
  // And a region the queues left no room for.
  core::AllocateOptions buffer;
  buffer.size = 4096;
  EXPECT_EQ(regions.Allocate(caller, buffer).status().code(),
            absl::StatusCode::kResourceExhausted);

  // Closing a queue gives its memory back; ending the session, all of it.
  ASSERT_TRUE(registry.Close(caller.session_id, ids[0]).ok());
  EXPECT_EQ(regions.UsageOf(caller.uid).pinned_bytes, 2 * segment);
  EXPECT_TRUE(registry.Open(caller, Small()).ok());
  registry.EndSession(caller.session_id);
  EXPECT_EQ(regions.UsageOf(caller.uid).pinned_bytes, 0u);
  registry.Shutdown();
}

// A notification goes to the notification queue of the session that owns a
// session buffer, or to those of every session of a named region's owner
// uid; while the owner has none open it is held for it, and the next one
// opened gets it, in order.
TEST_F(QueueRegistryTest, NotificationsReachTheOwnersQueuesOrWaitForThem) {
  registry_->SetSelfAddress("127.0.0.1:7471");
  auto open_as = [this](uint32_t uid) {
    core::SessionTable::Opened opened = sessions_.Open(uid, uid, 42);
    return core::Caller{opened.id, uid, uid, 42, {}};
  };
  const core::Caller first = open_as(1000);
  const core::Caller second = open_as(1000);
  const core::Caller stranger = open_as(2000);
  auto q1 = registry_->Open(first, Small(true));
  auto q2 = registry_->Open(second, Small(true));
  auto q3 = registry_->Open(stranger, Small(true));
  auto plain = registry_->Open(first, Small());  // takes none
  ASSERT_TRUE(q1.ok() && q2.ok() && q3.ok() && plain.ok());
  auto notified = [](const absl::StatusOr<std::shared_ptr<RingQueue>>& q) {
    return (*q)->stats().notified;
  };

  auto inbox = Inbox(first);
  ASSERT_NE(inbox, nullptr);
  core::AllocateOptions buffer;
  buffer.size = 4096;
  auto mine = regions_.Allocate(first, buffer);
  ASSERT_TRUE(mine.ok()) << mine.status();

  Notify(*registry_, *inbox, 1);
  EXPECT_EQ(notified(q1), 1u);
  EXPECT_EQ(notified(q2), 1u) << "every session of the owner's uid";
  EXPECT_EQ(notified(q3), 0u) << "not another uid's";
  EXPECT_EQ(notified(plain), 0u);
  Notify(*registry_, **mine, 2);
  EXPECT_EQ(notified(q1), 2u);
  EXPECT_EQ(notified(q2), 1u) << "a session buffer: its own session only";

  // Closed: no longer told; the other session of the uid still is, and
  // the buffer's notification is held for its session.
  ASSERT_TRUE(registry_->Close(first.session_id, (*q1)->id()).ok());
  Notify(*registry_, *inbox, 3);
  Notify(*registry_, **mine, 4);
  EXPECT_EQ(notified(q1), 2u);
  EXPECT_EQ(notified(q2), 2u);
  // Ended: no queue of uid 1000 left; the region's are held for the uid.
  registry_->EndSession(second.session_id);
  Notify(*registry_, *inbox, 5);
  EXPECT_EQ(notified(q3), 0u);
  EXPECT_EQ(registry_->Totals().notifications_held, 2u);
  // A new notification queue of the session gets both, in order, then
  // the next.
  auto again = registry_->Open(first, Small(true));
  ASSERT_TRUE(again.ok()) << again.status();
  Notify(*registry_, *inbox, 6);
  Reader reader(**again);
  EXPECT_EQ(reader.PollUntil(3), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(reader.writer, "127.0.0.1:7471")
      << "a local writer is named by this daemon's address";
  EXPECT_EQ(reader.writer_uid, 1001u);
  EXPECT_EQ(registry_->Totals().notifications_held, 0u);
  EXPECT_EQ(registry_->Totals().notifications_lost, 0u);
}

// A queue closed with notifications it had no room for hands them to the
// owner's next queue; a session that ends before it opened one loses its
// buffers' notifications, counted.
TEST_F(QueueRegistryTest, NothingHeldGoesWithoutACount) {
  const core::Caller alice = Open();
  auto inbox = Inbox(alice);
  ASSERT_NE(inbox, nullptr);
  auto q = registry_->Open(alice, Small(true));
  ASSERT_TRUE(q.ok());
  for (uint32_t i = 1; i <= 12; ++i) Notify(*registry_, *inbox, i);
  EXPECT_EQ((*q)->stats().notified, 8u) << "half of the 16-entry ring";
  EXPECT_EQ((*q)->stats().held, 4u);
  ASSERT_TRUE(registry_->Close(alice.session_id, (*q)->id()).ok());
  EXPECT_EQ(registry_->Totals().notifications_held, 4u);
  auto next = registry_->Open(alice, Small(true));
  ASSERT_TRUE(next.ok());
  Reader reader(**next);
  EXPECT_EQ(reader.PollUntil(4), (std::vector<int64_t>{9, 10, 11, 12}));

  const core::Caller bob = Open();
  core::AllocateOptions buffer;
  buffer.size = 4096;
  auto bobs = regions_.Allocate(bob, buffer);
  ASSERT_TRUE(bobs.ok());
  Notify(*registry_, **bobs, 1);
  Notify(*registry_, **bobs, 2);
  EXPECT_EQ(registry_->Totals().notifications_held, 2u);
  registry_->EndSession(bob.session_id);
  EXPECT_EQ(registry_->Totals().notifications_held, 0u);
  EXPECT_EQ(registry_->Totals().notifications_lost, 2u);
}

// One budget for all the backlogs of a uid: two queues that do not poll
// hold `notification_backlog` between them; the rest is counted, and each
// queue learns in order how many it lost.
TEST_F(QueueRegistryTest, TheBacklogIsBoundedPerUid) {
  QueueRegistry registry(runtime_.get(), &transfers_, &sessions_, &regions_,
                         /*notification_backlog=*/4);
  const core::Caller one = Open();
  const core::Caller two = Open();
  auto inbox = Inbox(one);
  ASSERT_NE(inbox, nullptr);
  RingQueueOptions options = Small(true);
  options.completion_entries = 8;  // four notifications on the ring
  auto q1 = registry.Open(one, options);
  auto q2 = registry.Open(two, options);
  ASSERT_TRUE(q1.ok() && q2.ok());
  for (uint32_t i = 1; i <= 10; ++i) Notify(registry, *inbox, i);
  QueueTotals totals = registry.Totals();
  EXPECT_EQ(totals.notifications_delivered, 8u);
  EXPECT_EQ(totals.notifications_held, 4u) << "the uid's bound, both queues";
  EXPECT_EQ(totals.notifications_lost, 8u);
  EXPECT_EQ((*q1)->stats().held + (*q2)->stats().held, 4u);
  EXPECT_EQ((*q1)->stats().lost, 4u);
  EXPECT_FALSE((*q1)->stopped());
  Reader reader(**q1);
  EXPECT_EQ(reader.PollUntil(7), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, -4}));
  registry.Shutdown();
}

TEST_F(QueueRegistryTest, ListAndTotalsShowEveryQueueAndKeepClosedOnesCounts) {
  const core::Caller alice = Open();
  core::SessionTable::Opened opened = sessions_.Open(2000, 2000, 77);
  const core::Caller bob{opened.id, 2000, 2000, 77, {}};
  auto notified = registry_->Open(alice, Small(/*notifications=*/true));
  auto plain = registry_->Open(bob, Small());
  ASSERT_TRUE(notified.ok() && plain.ok());

  std::vector<QueueSnapshot> list = registry_->List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, (*notified)->id());
  EXPECT_EQ(list[0].caller.session_id, alice.session_id);
  EXPECT_EQ(list[0].caller.pid, 42);
  EXPECT_EQ(list[0].caller.uid, 1000u);
  EXPECT_TRUE(list[0].notifications);
  EXPECT_EQ(list[0].geometry.sq_entries, 8u);
  EXPECT_EQ(list[0].geometry.cq_entries, 16u);
  EXPECT_FALSE(list[0].engine.empty());
  EXPECT_EQ(list[1].id, (*plain)->id());
  EXPECT_EQ(list[1].caller.uid, 2000u);
  EXPECT_FALSE(list[1].notifications);

  // Alice's buffer: half her ring takes notifications, the rest is held.
  core::AllocateOptions buffer;
  buffer.size = 4096;
  auto region = regions_.Allocate(alice, buffer);
  ASSERT_TRUE(region.ok()) << region.status();
  for (int i = 0; i < 20; ++i) Notify(*registry_, **region, i);
  QueueTotals totals = registry_->Totals();
  EXPECT_EQ(totals.running, 2u);
  EXPECT_EQ(totals.stopped, 0u);
  EXPECT_EQ(totals.notifications_delivered, 8u);
  EXPECT_EQ(totals.notifications_held, 12u);
  list = registry_->List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].stats.notified, 8u);
  EXPECT_EQ(list[0].stats.held, 12u);
  EXPECT_TRUE(list[0].stats.stop_reason.ok());

  // Closed: gone from the list, its counts kept in the totals.
  ASSERT_TRUE(registry_->Close(alice.session_id, (*notified)->id()).ok());
  totals = registry_->Totals();
  EXPECT_EQ(totals.running, 1u);
  EXPECT_EQ(totals.stopped, 0u);
  EXPECT_EQ(totals.notifications_delivered, 8u);
  registry_->EndSession(bob.session_id);
  EXPECT_TRUE(registry_->List().empty());
  EXPECT_EQ(registry_->Totals().running, 0u);
  EXPECT_EQ(registry_->Totals().notifications_delivered, 8u);
}

}  // namespace
}  // namespace rdmad::ring
