// RingEngine (daemon/ring/ring_engine.h) on a real event loop with a fake
// peer layer that keeps the transfers it is given: a round's operations
// reach the peer layer as one batch, a malformed entry completes at once
// with its status, and the queue lives until the last completion of a
// round has run — also when the queue was detached meanwhile, and when the
// peer layer drops a transfer without running it (nothing leaks). Copies
// to regions of this daemon are served in the round, in order, and a name
// not here goes to the cluster directory.
#include "daemon/ring/ring_engine.h"

#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <mutex>
#include <optional>
#include <vector>

#include "common/queue_ring.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/core/region_table.h"
#include "daemon/core/transfer_engine.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/callers.h"
#include "tests/unit/fakes/teardown_recorder.h"

namespace rdmad::ring {
namespace {

using core::testing::kAlice;

constexpr absl::Duration kPatience = absl::Seconds(20);

// Keeps every transfer until the test finishes or drops it. SubmitBatch
// runs on the engine's loop; the test reads under the lock.
class KeptRemote final : public core::RemoteTransfers {
 public:
  void SubmitBatch(absl::Span<core::Transfer> transfers) override {
    std::lock_guard<std::mutex> lock(mu_);
    batches_.push_back(transfers.size());
    for (core::Transfer& t : transfers) kept_.push_back(std::move(t));
  }
  std::vector<core::Transfer> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(kept_);
  }
  std::vector<size_t> batches() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }

 private:
  std::mutex mu_;
  std::vector<core::Transfer> kept_;
  std::vector<size_t> batches_;
};

class RingEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    core::AllocateOptions buffer;
    buffer.size = 4096;
    auto local = regions_.Allocate(kAlice, buffer);
    ASSERT_TRUE(local.ok()) << local.status();
    local_id_ = (*local)->id();

    auto handles = std::make_shared<RemoteHandles>();
    RemoteHandle remote;
    remote.target.peer = "192.0.2.1:7471";
    remote.target.name = "kv";
    remote.size = 4096;
    remote.access = core::RemoteAccess::kReadWrite;
    remote.transport = core::TransportKind::kTcp;
    auto added = handles->Add(remote);
    ASSERT_TRUE(added.ok()) << added.status();
    handle_id_ = (*added)->id;

    RingQueueOptions options;
    options.submission_entries = 16;
    options.completion_entries = 32;
    auto queue = RingQueue::Create(1, kAlice, handles, options);
    ASSERT_TRUE(queue.ok()) << queue.status();
    queue_ = *queue;
    client_ = ::mmap(nullptr, queue_->segment_size(), PROT_READ | PROT_WRITE,
                     MAP_SHARED, queue_->segment_fd(), 0);
    ASSERT_NE(client_, MAP_FAILED);
    segment_size_ = queue_->segment_size();
    producer_.emplace(client_);
    reaper_.emplace(client_);

    auto loop = runtime::EventLoop::Create("ring-engine-test");
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = *std::move(loop);
    loop_->Start();
    engine_ = std::make_unique<RingEngine>(loop_.get(), &transfers_);
    engine_->Attach(queue_);
  }

  void TearDown() override {
    engine_->Shutdown();
    loop_->Stop();
    ::munmap(client_, segment_size_);
  }

  // Puts `n` WRITEs (tags 1..n) and one entry naming no handle (tag 99) on
  // the ring.
  void SubmitRound(int n) {
    queue::SubmissionProducer& producer = *producer_;
    for (int i = 1; i <= n; ++i) {
      queue::SubmissionEntry e{};
      e.op = static_cast<uint8_t>(queue::OpCode::kWrite);
      e.tag = static_cast<uint64_t>(i);
      e.local_region = local_id_;
      e.remote_handle = handle_id_;
      e.length = 8;
      producer.Push(e);
    }
    queue::SubmissionEntry bad{};
    bad.op = static_cast<uint8_t>(queue::OpCode::kWrite);
    bad.tag = 99;
    bad.local_region = local_id_;
    bad.remote_handle = 12345;
    bad.length = 8;
    producer.Push(bad);
    producer.Publish();
  }

  // Waits for `n` completions (more than one Poll if need be).
  std::vector<queue::CompletionEntry> Reap(size_t n) {
    std::vector<queue::CompletionEntry> out;
    const absl::Time until = absl::Now() + kPatience;
    while (out.size() < n && absl::Now() < until) {
      queue::CompletionEntry done[32];
      const size_t got = reaper_->Poll(absl::MakeSpan(done));
      out.insert(out.end(), done, done + got);
      if (got == 0) absl::SleepFor(absl::Microseconds(100));
    }
    return out;
  }

  core::testing::TeardownRecorder registrar_;
  core::RegionTable regions_{&registrar_, core::RegionLimits{}};
  KeptRemote remote_;
  core::TransferEngine transfers_{&regions_, &remote_};
  uint64_t local_id_ = 0;
  uint64_t handle_id_ = 0;
  std::shared_ptr<RingQueue> queue_;
  void* client_ = nullptr;
  uint64_t segment_size_ = 0;
  std::unique_ptr<runtime::EventLoop> loop_;
  std::unique_ptr<RingEngine> engine_;
  // One for the queue's life: it keeps the positions it pushed.
  std::optional<queue::SubmissionProducer> producer_;
  std::optional<queue::CompletionConsumer> reaper_;

 public:
  // The parts a helper outside the fixture uses.
  struct Fixture {
    const core::testing::TeardownRecorder& registrar;
    core::RegionTable& regions;
    core::TransferEngine& transfers;
    std::shared_ptr<RingQueue>& queue;
    std::unique_ptr<RingEngine>& engine;
    queue::SubmissionProducer& producer;
    queue::CompletionConsumer& reaper;
    uint64_t local_id;
  };
};

TEST_F(RingEngineTest, TheQueueLivesUntilTheLastCompletionOfItsRounds) {
  SubmitRound(3);
  // The bad entry completes at the end of the round, after the batch went
  // to the peer layer.
  std::vector<queue::CompletionEntry> first = Reap(1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].tag, 99u);
  EXPECT_EQ(first[0].code, static_cast<int>(absl::StatusCode::kNotFound));
  EXPECT_EQ(remote_.batches(), std::vector<size_t>{3}) << "one batch";

  // Detached and forgotten by everyone but the transfers in flight.
  engine_->Detach(queue_->id());
  std::weak_ptr<RingQueue> weak = queue_;
  queue_.reset();
  std::vector<core::Transfer> held = remote_.Take();
  ASSERT_EQ(held.size(), 3u);
  // Detach is a task on the loop: once it ran, only the rounds hold it.
  ASSERT_TRUE(runtime::RunOnLoop(loop_.get(), [] {
                return absl::OkStatus();
              }).ok());
  EXPECT_FALSE(weak.expired());
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_FALSE(weak.expired()) << "freed before completion " << i;
    held[i].done(core::TransferResult{8, core::TransportKind::kTcp,
                                      absl::Microseconds(3)});
  }
  EXPECT_TRUE(weak.expired()) << "the last completion let it go";
  std::vector<queue::CompletionEntry> rest = Reap(3);
  ASSERT_EQ(rest.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rest[i].tag, i + 1);
    EXPECT_EQ(rest[i].code, 0);
    EXPECT_EQ(rest[i].bytes, 8u);
  }
}

// CPU time the loop's thread has used so far.
absl::Duration LoopCpuTime(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return absl::DurationFromTimespec(ts);
}

TEST_F(RingEngineTest, AClientThatConsumesNoCompletionsLetsTheEngineSleep) {
  clockid_t loop_clock{};
  ASSERT_TRUE(runtime::RunOnLoop(loop_.get(), [&]() -> absl::Status {
                return ::pthread_getcpuclockid(::pthread_self(), &loop_clock) == 0
                           ? absl::OkStatus()
                           : absl::InternalError("pthread_getcpuclockid");
              }).ok());
  // Entries that fail at once (no such handle), 16 at a time (the
  // submission ring's size), until all 32 completion slots are full.
  const auto push_failing = [&](uint64_t first_tag, int n) {
    for (int i = 0; i < n; ++i) {
      queue::SubmissionEntry e{};
      e.op = static_cast<uint8_t>(queue::OpCode::kWrite);
      e.tag = first_tag + static_cast<uint64_t>(i);
      e.local_region = local_id_;
      e.remote_handle = 12345;
      e.length = 8;
      producer_->Push(e);
    }
    producer_->Publish();
  };
  auto* header = static_cast<queue::QueueHeader*>(client_);
  const auto published = [&](uint32_t n) {
    const absl::Time until = absl::Now() + kPatience;
    while (header->cq_tail.load() < n && absl::Now() < until) {
      absl::SleepFor(absl::Microseconds(200));
    }
    return header->cq_tail.load() >= n;
  };
  push_failing(1, 16);
  ASSERT_TRUE(published(16));
  push_failing(17, 16);
  ASSERT_TRUE(published(32));
  // One more, which has no room for its completion: it waits. Rung in,
  // as the client library does when the engine sleeps.
  push_failing(33, 1);
  const uint64_t one = 1;
  ASSERT_EQ(::write(queue_->doorbell_fd(), &one, sizeof(one)), 8);

  // The engine must not spin on it: the client may never make room.
  absl::SleepFor(absl::Milliseconds(100));  // past the loop's spin
  const absl::Duration before = LoopCpuTime(loop_clock);
  absl::SleepFor(absl::Seconds(1));
  const absl::Duration used = LoopCpuTime(loop_clock) - before;
  EXPECT_LT(used, absl::Milliseconds(150))
      << "the engine spun while the queue could not go on";
  EXPECT_EQ(header->cq_tail.load(), 32u);

  // Room made, no doorbell rung (a client that only polls rings none):
  // the engine looks again by itself and completes the one that waited.
  std::vector<queue::CompletionEntry> done = Reap(32);
  ASSERT_EQ(done.size(), 32u);
  done = Reap(1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tag, 33u);
  EXPECT_EQ(done[0].code, static_cast<int32_t>(absl::StatusCode::kNotFound));
  EXPECT_FALSE(queue_->stopped());
}

// Notifications held for want of room reach the client as it frees room,
// in order, without a doorbell (a client that only polls rings none), and
// the engine does not spin on them while the client frees none.
TEST_F(RingEngineTest, HeldNotificationsFollowAsTheClientFreesRoom) {
  clockid_t loop_clock{};
  ASSERT_TRUE(runtime::RunOnLoop(loop_.get(), [&]() -> absl::Status {
                return ::pthread_getcpuclockid(::pthread_self(), &loop_clock) ==
                               0
                           ? absl::OkStatus()
                           : absl::InternalError("pthread_getcpuclockid");
              }).ok());
  RingQueueOptions options;
  options.completion_entries = 8;
  options.notifications = true;
  auto notes =
      RingQueue::Create(2, kAlice, std::make_shared<RemoteHandles>(), options);
  ASSERT_TRUE(notes.ok()) << notes.status();
  (*notes)->HoldNotifications(NotificationBacklog(
      std::make_shared<NotificationBudget>(kAlice.uid, 100)));
  engine_->Attach(*notes);
  for (uint32_t i = 0; i < 40; ++i) {
    PendingNotification n;
    n.sequence = i;
    n.immediate = i;
    n.writer = std::make_shared<const std::string>("127.0.0.1:7471");
    if ((*notes)->Notify(n)) (*notes)->WakeClient();
  }
  void* client =
      ::mmap(nullptr, (*notes)->segment_size(), PROT_READ | PROT_WRITE,
             MAP_SHARED, (*notes)->segment_fd(), 0);
  ASSERT_NE(client, MAP_FAILED);
  absl::SleepFor(absl::Milliseconds(100));  // past the loop's spin
  const absl::Duration before = LoopCpuTime(loop_clock);
  absl::SleepFor(absl::Seconds(1));
  EXPECT_LT(LoopCpuTime(loop_clock) - before, absl::Milliseconds(150))
      << "the engine spun while the client freed no room";

  queue::CompletionConsumer reaper(client);
  std::vector<uint32_t> got;
  const absl::Time start = absl::Now();
  const absl::Time until = start + kPatience;
  while (got.size() < 40 && absl::Now() < until) {
    queue::CompletionEntry done[8];
    const size_t n = reaper.Poll(absl::MakeSpan(done));
    for (size_t i = 0; i < n; ++i) got.push_back(done[i].immediate);
    if (n == 0) absl::SleepFor(absl::Microseconds(100));
  }
  std::vector<uint32_t> want(40);
  for (uint32_t i = 0; i < 40; ++i) want[i] = i;
  EXPECT_EQ(got, want);
  // Ten refills of four: each within the engine's longest look-again
  // (10 ms), not the loop's longest sleep (1 s).
  EXPECT_LT(absl::Now() - start, absl::Seconds(3))
      << "held notifications waited for the loop's longest sleep";
  EXPECT_FALSE((*notes)->holds_notifications());
  engine_->Detach(2);
  ::munmap(client, (*notes)->segment_size());
}

TEST_F(RingEngineTest, TransfersDroppedWithoutCompletingReleaseTheQueue) {
  SubmitRound(2);
  ASSERT_EQ(Reap(1).size(), 1u);
  engine_->Detach(queue_->id());
  ASSERT_TRUE(runtime::RunOnLoop(loop_.get(), [] {
                return absl::OkStatus();
              }).ok());
  std::weak_ptr<RingQueue> weak = queue_;
  queue_.reset();
  {
    std::vector<core::Transfer> held = remote_.Take();
    ASSERT_EQ(held.size(), 2u);
    EXPECT_FALSE(weak.expired());
  }  // dropped: their callbacks never run
  EXPECT_TRUE(weak.expired());
}

TEST_F(RingEngineTest, AClosedHandleFailsTheOperationsAfterIt) {
  // The queue keeps the handle it used last; closing any handle of the
  // session makes it look again.
  SubmitRound(1);
  ASSERT_EQ(Reap(1).size(), 1u);  // the bad entry
  ASSERT_EQ(remote_.Take().size(), 1u);
  ASSERT_TRUE(queue_->handles()->Remove(handle_id_).ok());
  SubmitRound(2);
  std::vector<queue::CompletionEntry> done = Reap(3);
  ASSERT_EQ(done.size(), 3u);
  for (const queue::CompletionEntry& c : done) {
    EXPECT_EQ(c.code, static_cast<int>(absl::StatusCode::kNotFound)) << c.tag;
  }
  EXPECT_TRUE(remote_.Take().empty()) << "nothing reached the peer layer";
  EXPECT_EQ(remote_.batches(), std::vector<size_t>{1});
}

// Answers every name with a region on another daemon.
class ElsewhereDirectory final : public core::RegionResolver {
 public:
  void Resolve(const std::string& name, absl::Time, core::DirectoryGeneration,
               core::ResolveDone done) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      asked_.push_back(name);
    }
    core::DirectoryEntry entry;
    entry.name = name;
    entry.node = "192.0.2.9:7471";
    entry.size = 4096;
    entry.access = core::RemoteAccess::kReadWrite;
    entry.region_id = 5;
    entry.generation = {77, 1};
    done(entry);
  }
  std::string self_node() const override { return "127.0.0.1:7471"; }
  std::vector<std::string> asked() {
    std::lock_guard<std::mutex> lock(mu_);
    return asked_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> asked_;
};

// One round with copies to a region of this daemon, a remote WRITE, and a
// name that is not here: the copies land and complete with the round (in
// submission order, as local), the remote WRITE goes to the peer layer,
// and the name not here to the cluster directory and then to the daemon
// it names.
TEST_F(RingEngineTest, ARoundCopiesHereAndSendsTheRestOn) {
  ElsewhereDirectory directory;
  transfers_.SetDirectory(&directory);
  core::AllocateOptions here;
  here.name = "here";
  here.size = 64;
  here.daemon_owned = true;
  auto region = regions_.Allocate(kAlice, here);
  ASSERT_TRUE(region.ok()) << region.status();
  std::memset((*region)->data(), 'h', 64);
  auto buffer = regions_.FindForUse(kAlice, {local_id_, ""});
  ASSERT_TRUE(buffer.ok());
  std::memcpy((*buffer)->data(), "12345678", 8);

  auto add = [&](const char* name) {
    RemoteHandle h;
    h.target.name = name;
    h.size = 64;
    h.access = core::RemoteAccess::kReadWrite;
    h.transport = core::TransportKind::kLocal;
    auto added = queue_->handles()->Add(h);
    EXPECT_TRUE(added.ok()) << added.status();
    return added.ok() ? (*added)->id : 0;
  };
  const uint64_t here_handle = add("here");
  const uint64_t elsewhere_handle = add("elsewhere");
  // The bytes above reach the loop's thread through the loop too (see
  // below).
  ASSERT_TRUE(runtime::RunOnLoop(loop_.get(), [] {
                return absl::OkStatus();
              }).ok());
  auto entry = [&](queue::OpCode op, uint64_t tag, uint64_t handle,
                   uint64_t local_offset, uint64_t remote_offset) {
    queue::SubmissionEntry e{};
    e.op = static_cast<uint8_t>(op);
    e.tag = tag;
    e.local_region = local_id_;
    e.local_offset = local_offset;
    e.remote_handle = handle;
    e.remote_offset = remote_offset;
    e.length = 8;
    return e;
  };
  producer_->Push(entry(queue::OpCode::kWrite, 1, here_handle, 0, 16));
  producer_->Push(entry(queue::OpCode::kWrite, 2, handle_id_, 0, 0));
  producer_->Push(entry(queue::OpCode::kRead, 3, here_handle, 100, 40));
  producer_->Push(entry(queue::OpCode::kWrite, 4, elsewhere_handle, 0, 0));
  producer_->Push(entry(queue::OpCode::kWrite, 5, here_handle, 0, 60));
  producer_->Publish();

  std::vector<queue::CompletionEntry> done = Reap(3);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].tag, 1u);
  EXPECT_EQ(done[1].tag, 3u);
  EXPECT_EQ(done[2].tag, 5u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(done[i].code, 0) << done[i].tag;
    EXPECT_EQ(done[i].bytes, 8u);
    EXPECT_EQ(done[i].transport, 3) << "local";
  }
  EXPECT_EQ(done[2].code, static_cast<int>(absl::StatusCode::kOutOfRange))
      << "60+8 is past the end of the 64 bytes";
  // The ring orders memory through the client's mapping of the segment,
  // which ThreadSanitizer does not connect to the daemon's mapping: order
  // the reads below after the round through the loop instead.
  ASSERT_TRUE(runtime::RunOnLoop(loop_.get(), [] {
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(std::string((*region)->data() + 16, 8), "12345678");
  EXPECT_EQ(std::string((*buffer)->data() + 100, 8), "hhhhhhhh");
  EXPECT_EQ(std::string((*region)->data() + 56, 8), "hhhhhhhh");
  // The local copies were accounted for (after their round's completions
  // were published: TransferEngine::ReportCopy), each once; the remote
  // ones are not done yet.
  EXPECT_EQ(transfers_.counters().ops_ok, 2u);
  EXPECT_EQ(transfers_.counters().ops_failed, 1u);
  EXPECT_EQ(transfers_.counters().bytes_written, 8u);
  EXPECT_EQ(transfers_.counters().bytes_read, 8u);

  // The remote WRITE in the round's batch; the name not here asked of the
  // directory and sent to the daemon it named.
  EXPECT_EQ(directory.asked(), std::vector<std::string>{"elsewhere"});
  std::vector<core::Transfer> sent = remote_.Take();
  ASSERT_EQ(sent.size(), 2u);
  std::vector<std::string> targets;
  for (const core::Transfer& t : sent) {
    targets.push_back(t.remote.peer + "/" + t.remote.name);
  }
  std::sort(targets.begin(), targets.end());
  EXPECT_EQ(targets, (std::vector<std::string>{"192.0.2.1:7471/kv",
                                               "192.0.2.9:7471/elsewhere"}));
  for (core::Transfer& t : sent) {
    t.done(core::TransferResult{8, core::TransportKind::kTcp,
                                absl::Microseconds(3)});
  }
  std::vector<queue::CompletionEntry> rest = Reap(2);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].tag + rest[1].tag, 2u + 4u);
  transfers_.SetDirectory(nullptr);
}

// A queue's region cache holds the regions it names (core::CachedRegion):
// a region freed while its queue is idle must still go at once, with its
// memory, whether the engine keeps spinning (the table's generation moved)
// or goes to sleep. `spin`: how long the engine's loop spins after work.
void FreedRegionGoesWhileTheQueueIsIdle(RingEngineTest::Fixture& f,
                                        absl::Duration spin);

TEST_F(RingEngineTest, AFreedRegionGoesWhileTheQueueIsIdleAndTheEngineSleeps) {
  Fixture f{registrar_, regions_,   transfers_, queue_,
            engine_,    *producer_, *reaper_,   local_id_};
  FreedRegionGoesWhileTheQueueIsIdle(f, absl::ZeroDuration());
}

TEST_F(RingEngineTest, AFreedRegionGoesWhileTheQueueIsIdleAndTheEngineSpins) {
  Fixture f{registrar_, regions_,   transfers_, queue_,
            engine_,    *producer_, *reaper_,   local_id_};
  // An hour: the loop never sleeps during the test, so only the
  // generation can make the cache let go.
  FreedRegionGoesWhileTheQueueIsIdle(f, absl::Hours(1));
}

void FreedRegionGoesWhileTheQueueIsIdle(RingEngineTest::Fixture& f,
                                        absl::Duration spin) {
  // The queue moves to an engine on a loop that spins for `spin`.
  f.engine->Detach(f.queue->id());
  // Detach is posted to the old loop: until it runs, that engine may still
  // empty this queue's cache while the new one does (a race TSan caught).
  // Shutdown returns once the old loop let go of every queue.
  f.engine->Shutdown();
  runtime::EventLoop::Options options;
  options.spin = spin;
  auto loop = runtime::EventLoop::Create("ring-engine-spin", options);
  ASSERT_TRUE(loop.ok()) << loop.status();
  (*loop)->Start();
  auto engine = std::make_unique<RingEngine>(loop->get(), &f.transfers);
  engine->Attach(f.queue);

  core::AllocateOptions here;
  here.name = "here";
  here.size = 4096;
  here.daemon_owned = true;
  auto region = f.regions.Allocate(kAlice, here);
  ASSERT_TRUE(region.ok()) << region.status();
  std::weak_ptr<core::Region> weak = *region;
  region->reset();
  RemoteHandle h;
  h.target.name = "here";
  h.size = 4096;
  h.access = core::RemoteAccess::kReadWrite;
  h.transport = core::TransportKind::kLocal;
  auto added = f.queue->handles()->Add(h);
  ASSERT_TRUE(added.ok()) << added.status();

  queue::SubmissionEntry e{};
  e.op = static_cast<uint8_t>(queue::OpCode::kWrite);
  e.tag = 1;
  e.local_region = f.local_id;
  e.remote_handle = (*added)->id;
  e.length = 8;
  f.producer.Push(e);
  f.producer.Publish();
  queue::CompletionEntry done{};
  for (const absl::Time until = absl::Now() + kPatience;
       f.reaper.Poll(absl::MakeSpan(&done, 1)) == 0 && absl::Now() < until;) {
    absl::SleepFor(absl::Microseconds(100));
  }
  ASSERT_EQ(done.tag, 1u);
  ASSERT_EQ(done.code, 0);

  if (spin == absl::ZeroDuration()) {
    // An engine that goes to sleep lets go of every region first (it would
    // notice no free while asleep): the cache empties with no free at all.
    // Read on the loop's thread, which owns the cache.
    bool empty = false;
    for (const absl::Time until = absl::Now() + kPatience;
         !empty && absl::Now() < until;) {
      ASSERT_TRUE(runtime::RunOnLoop(loop->get(), [&] {
                    empty = f.queue->region_cache().target.region == nullptr;
                    return absl::OkStatus();
                  }).ok());
      if (!empty) absl::SleepFor(absl::Milliseconds(1));
    }
    EXPECT_TRUE(empty) << "the engine slept holding the queue's regions";
  }
  ASSERT_TRUE(f.regions.Free(kAlice, {0, "here"}).ok());
  for (const absl::Time until = absl::Now() + kPatience;
       !weak.expired() && absl::Now() < until;) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_TRUE(weak.expired())
      << "the idle queue's cache still holds the freed region";
  // Whoever dropped it last tore it down, never the engine's loop: the
  // test's thread (Free) when the sleeping engine had let go already; when
  // it spins, Free or the loop, whichever lets go last (Free's own
  // reference races the loop's look at the generation), and the loop
  // hands the teardown to the table's releaser, not making its queues
  // wait (RegionReleaserTest checks the hand-over itself).
  // (`weak` expires before the deleter runs: wait for the teardown.)
  for (const absl::Time until = absl::Now() + kPatience;
       f.registrar.threads().empty() && absl::Now() < until;) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_TRUE(f.regions.releaser().WaitIdle(kPatience));
  if (spin == absl::ZeroDuration()) {
    EXPECT_EQ(f.regions.releaser().handed_over(), 0u);
  }
  const std::string loop_thread = std::string("ring-engine-spin").substr(0, 15);
  for (const std::string& thread : f.registrar.threads()) {
    EXPECT_NE(thread, loop_thread) << "the engine's loop tore a region down";
  }
  EXPECT_FALSE(f.registrar.threads().empty());
  engine->Shutdown();
  (*loop)->Stop();
}

}  // namespace
}  // namespace rdmad::ring
