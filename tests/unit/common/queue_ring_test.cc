// The shared-memory queue protocol (common/queue_ring.h) with both ends in
// one process over one segment: entries travel intact through many
// wraparounds, full rings push back, and a peer that scribbles on the
// segment is caught at the end that reads it.
#include "common/queue_ring.h"

#include <pthread.h>
#include <sched.h>

#include <cstddef>
#include <cstring>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::queue {
namespace {

using ::testing::HasSubstr;

class QueueRingTest : public ::testing::Test {
 protected:
  void Make(uint32_t sq, uint32_t cq) {
    geometry_ = GeometryFor(sq, cq);
    memory_.assign(geometry_.total_size, 0xee);  // not zero: init must clear
    InitializeSegment(base(), geometry_);
  }
  void* base() { return memory_.data(); }
  QueueHeader* header() { return static_cast<QueueHeader*>(base()); }

  static SubmissionEntry Entry(uint64_t tag) {
    SubmissionEntry e{};
    e.op = static_cast<uint8_t>(OpCode::kWrite);
    e.tag = tag;
    e.local_region = 1;
    e.local_offset = tag * 3;
    e.remote_handle = 2;
    e.remote_offset = tag * 5;
    e.length = tag + 1;
    return e;
  }

  Geometry geometry_;
  std::vector<uint8_t> memory_;
};

// The completion transport is ring ABI: its numbers are fixed, and a number
// a newer or corrupt daemon writes reads as unknown.
TEST(CompletionTransportTest, NumbersAndNames) {
  struct Case {
    uint8_t code;
    CompletionTransport transport;
    std::string_view name;
  };
  const Case cases[] = {
      {0, CompletionTransport::kUnknown, "unknown"},
      {1, CompletionTransport::kVerbs, "verbs"},
      {2, CompletionTransport::kTcp, "tcp"},
      {3, CompletionTransport::kLocal, "local"},
      {4, CompletionTransport::kUnknown, "unknown"},
      {255, CompletionTransport::kUnknown, "unknown"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(int{c.code});
    EXPECT_EQ(CompletionTransportOf(c.code), c.transport);
    EXPECT_EQ(Name(CompletionTransportOf(c.code)), c.name);
  }
}

TEST_F(QueueRingTest, GeometryIsRoundedAndChecked) {
  const Geometry g = GeometryFor(5, 100);
  EXPECT_EQ(g.sq_entries, kMinEntries);
  EXPECT_EQ(g.cq_entries, 128u);
  EXPECT_EQ(g.total_size % 4096, 0u);
  EXPECT_EQ(GeometryFor(1u << 30, 0).sq_entries, kMaxEntries);
  Make(16, 32);
  EXPECT_TRUE(CheckSegment(base(), geometry_.total_size).ok());
  EXPECT_EQ(CheckSegment(base(), geometry_.total_size - 4096).code(),
            absl::StatusCode::kDataLoss);
  header()->sq_entries = 12;  // not a power of two
  EXPECT_EQ(CheckSegment(base(), geometry_.total_size).code(),
            absl::StatusCode::kDataLoss);
  header()->sq_entries = 16;
  header()->version = kVersion - 1;  // a daemon of another release
  const absl::Status other = CheckSegment(base(), geometry_.total_size);
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.message(), HasSubstr("client library of the daemon's"));
  header()->version = kVersion;
  header()->magic = 0;
  EXPECT_EQ(CheckSegment(base(), geometry_.total_size).code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(QueueRingTest, EntriesSurviveManyWraparounds) {
  Make(8, 8);
  SubmissionProducer producer(base());
  SubmissionConsumer consumer(base(), geometry_);
  CompletionProducer completer(base(), geometry_);
  CompletionConsumer reaper(base());
  uint64_t next = 0, seen = 0;
  for (int round = 0; round < 1000; ++round) {
    const uint32_t n = 1 + round % 8;
    ASSERT_GE(producer.Space(), n);
    for (uint32_t i = 0; i < n; ++i) producer.Push(Entry(next++));
    producer.Publish();
    SubmissionEntry taken[8];
    auto got = consumer.Take(absl::MakeSpan(taken));
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(*got, n);
    for (uint32_t i = 0; i < n; ++i) {
      const SubmissionEntry want = Entry(seen + i);
      ASSERT_EQ(std::memcmp(&taken[i], &want,
                            offsetof(SubmissionEntry, sequence)),
                0)
          << seen + i;
      ASSERT_EQ(taken[i].sequence, static_cast<uint32_t>(seen + i + 1));
      CompletionEntry c{};
      c.kind = static_cast<uint8_t>(CompletionKind::kCompletion);
      c.tag = taken[i].tag;
      c.bytes = taken[i].length;
      c.code = (taken[i].tag % 3 == 0) ? 5 : 0;  // NOT_FOUND now and then
      ASSERT_GT(*completer.Space(), 0u);
      completer.Push(c, c.code != 0 ? "region gone" : "");
    }
    completer.Publish();
    CompletionEntry done[8];
    std::string messages[8];
    ASSERT_EQ(reaper.Poll(absl::MakeSpan(done), messages), n);
    for (uint32_t i = 0; i < n; ++i) {
      EXPECT_EQ(done[i].tag, seen + i);
      EXPECT_EQ(done[i].bytes, seen + i + 1);
      if ((seen + i) % 3 == 0) {
        EXPECT_EQ(done[i].code, 5);
        EXPECT_EQ(messages[i], "region gone");
      } else {
        EXPECT_EQ(done[i].error, kNoError);
        EXPECT_TRUE(messages[i].empty());
      }
    }
    seen += n;
  }
  EXPECT_EQ(header()->sq_head.load(), seen);
  EXPECT_GT(seen, 3 * 8u) << "it did wrap";
}

TEST_F(QueueRingTest, FullRingsPushBack) {
  Make(8, 8);
  SubmissionProducer producer(base());
  SubmissionConsumer consumer(base(), geometry_);
  for (int i = 0; i < 8; ++i) producer.Push(Entry(i));
  producer.Publish();
  EXPECT_EQ(producer.Space(), 0u);
  SubmissionEntry taken[3];
  ASSERT_EQ(*consumer.Take(absl::MakeSpan(taken)), 3u);
  EXPECT_EQ(producer.Space(), 3u);
  CompletionProducer completer(base(), geometry_);
  for (int i = 0; i < 8; ++i) completer.Push(CompletionEntry{}, "");
  completer.Publish();
  EXPECT_EQ(*completer.Space(), 0u) << "the client has consumed nothing";
  CompletionConsumer reaper(base());
  CompletionEntry done[2];
  ASSERT_EQ(reaper.Poll(absl::MakeSpan(done)), 2u);
  EXPECT_EQ(*completer.Space(), 2u);
}

TEST_F(QueueRingTest, HeadsAreReadAgainOnlyWhenTheRoomSeenIsShort) {
  Make(8, 8);
  SubmissionProducer producer(base());
  SubmissionConsumer consumer(base(), geometry_);
  for (int i = 0; i < 8; ++i) producer.Push(Entry(i));
  producer.Publish();
  SubmissionEntry taken[8];
  ASSERT_EQ(*consumer.Take(absl::MakeSpan(taken, 3)), 3u);
  EXPECT_EQ(producer.Space(1), 3u) << "no room seen: the head is read";
  ASSERT_EQ(*consumer.Take(absl::MakeSpan(taken, 2)), 2u);
  EXPECT_EQ(producer.Space(2), 3u) << "enough room seen: not read again";
  EXPECT_EQ(producer.Space(4), 5u) << "too little room seen: read again";
  EXPECT_EQ(producer.Space(), 5u);

  CompletionProducer completer(base(), geometry_);
  CompletionConsumer reaper(base());
  for (int i = 0; i < 6; ++i) completer.Push(CompletionEntry{}, "");
  completer.Publish();
  EXPECT_EQ(*completer.Space(2), 2u);
  CompletionEntry done[8];
  ASSERT_EQ(reaper.Poll(absl::MakeSpan(done, 4)), 4u);
  EXPECT_EQ(*completer.Space(2), 2u) << "enough room seen: not read again";
  EXPECT_EQ(*completer.Space(3), 6u);
  // A lie is caught when the head is read, not before: the room seen last
  // was checked and stays usable.
  header()->cq_head.store(77);
  EXPECT_EQ(*completer.Space(6), 6u);
  EXPECT_EQ(completer.Space(7).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(completer.Space().status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(QueueRingTest, NothingIsVisibleBeforePublish) {
  Make(8, 8);
  SubmissionProducer producer(base());
  SubmissionConsumer consumer(base(), geometry_);
  CompletionProducer completer(base(), geometry_);
  CompletionConsumer reaper(base());
  producer.Push(Entry(1));
  producer.Push(Entry(2));
  EXPECT_FALSE(*consumer.Ready()) << "pushed, not published";
  SubmissionEntry taken[8];
  EXPECT_EQ(*consumer.Take(absl::MakeSpan(taken)), 0u);
  EXPECT_FALSE(producer.Publish());
  ASSERT_TRUE(*consumer.Ready());
  ASSERT_EQ(*consumer.Take(absl::MakeSpan(taken)), 2u);
  EXPECT_EQ(taken[1].tag, 2u);
  EXPECT_EQ(taken[1].sequence, 2u);
  EXPECT_FALSE(*consumer.Ready());
  EXPECT_FALSE(producer.Publish()) << "nothing new: no doorbell either";
  EXPECT_FALSE(*consumer.SleepUnlessWork()) << "all taken: sleep";
  consumer.Awake();
  // The same on the completion side.
  CompletionEntry c{};
  c.tag = 7;
  completer.Push(c, "");
  EXPECT_TRUE(reaper.Empty()) << "pushed, not published";
  EXPECT_FALSE(reaper.WaitUnlessReady());
  reaper.Done();
  EXPECT_FALSE(completer.Publish()) << "the client is awake: no wake-up";
  EXPECT_FALSE(reaper.Empty());
  EXPECT_TRUE(reaper.WaitUnlessReady()) << "published: poll, do not sleep";
  CompletionEntry got[4];
  ASSERT_EQ(reaper.Poll(absl::MakeSpan(got)), 1u);
  EXPECT_EQ(got[0].tag, 7u);
  EXPECT_TRUE(reaper.Empty());
  EXPECT_FALSE(reaper.WaitUnlessReady()) << "all polled: sleep";
  reaper.Done();
}

TEST_F(QueueRingTest, AnImpossibleSequenceStopsTaking) {
  Make(8, 8);
  SubmissionProducer producer(base());
  SubmissionConsumer consumer(base(), geometry_);
  auto* ring = reinterpret_cast<SubmissionEntry*>(
      static_cast<char*>(base()) + geometry_.sq_offset);
  producer.Push(Entry(1));
  producer.Publish();
  ring[1] = Entry(2);
  ring[1].sequence = 77;  // no entry of slot 1 has it
  SubmissionEntry taken[8];
  auto got = consumer.Take(absl::MakeSpan(taken));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("entry 1 has sequence 77"));
  EXPECT_THAT(got.status().message(), HasSubstr("overwritten"));
  // The entry of a lap ahead is as impossible as garbage.
  SubmissionConsumer fresh(base(), geometry_);
  ring[0].sequence = 9;  // position 8's, while position 0 is due
  EXPECT_EQ(fresh.Ready().status().code(), absl::StatusCode::kDataLoss);
  // Zero on a later lap: the slot was wiped, not left from the last lap.
  ring[0].sequence = 0;
  EXPECT_FALSE(*fresh.Ready()) << "first lap: zero is a slot not written yet";
  // A corrupt next slot is caught before sleeping too, whether the tail
  // covers it (this one does) or not.
  ring[0].sequence = 12345;
  auto work = fresh.SleepUnlessWork();
  EXPECT_EQ(work.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(work.status().message(), HasSubstr("entry 0 has sequence 12345"));
  header()->sq_tail.store(0);
  EXPECT_TRUE(*fresh.SleepUnlessWork()) << "awake, to take it and stop";
}

TEST_F(QueueRingTest, TheTailIsReadOnlyBeforeSleepingAndALieIsCaught) {
  Make(8, 8);
  SubmissionProducer producer(base());
  SubmissionConsumer consumer(base(), geometry_);
  producer.Push(Entry(1));
  producer.Publish();
  EXPECT_EQ(header()->sq_tail.load(), 1u) << "published after the entries";
  // Awake, the engine goes by the sequences only: a tail far ahead is not
  // even looked at.
  header()->sq_tail.store(1000);
  SubmissionEntry taken[8];
  ASSERT_EQ(*consumer.Take(absl::MakeSpan(taken)), 1u);
  EXPECT_FALSE(*consumer.Ready());
  // Before sleeping it is: more than the ring holds ahead of the head.
  auto work = consumer.SleepUnlessWork();
  EXPECT_EQ(work.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(work.status().message(), HasSubstr("ahead"));
  // Within the ring, over an entry whose sequence says it was not written.
  header()->sq_tail.store(2);
  work = consumer.SleepUnlessWork();
  EXPECT_EQ(work.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(work.status().message(), HasSubstr("its sequence says"));
  // Behind the head by less than a ring: entries taken before the client
  // published its tail; nothing claimed, sleep.
  header()->sq_tail.store(0);
  EXPECT_FALSE(*consumer.SleepUnlessWork());
  consumer.Awake();
  // Entries published since the tail was read keep the engine up too.
  header()->sq_tail.store(1);
  producer.Push(Entry(2));
  producer.Publish();
  header()->sq_tail.store(1);  // as if the tail's store were still on its way
  EXPECT_TRUE(*consumer.SleepUnlessWork());
}

TEST_F(QueueRingTest, AnEarlierLapsSequenceIsNotYetThere) {
  Make(8, 8);
  SubmissionProducer producer(base());
  SubmissionConsumer consumer(base(), geometry_);
  // 8 laps of 8, then one more entry: before each Publish the slot holds
  // the previous lap's sequence, which must read as "not yet", never as
  // "ready" or "corrupt".
  SubmissionEntry taken[8];
  for (uint32_t i = 0; i < 65; ++i) {
    producer.Push(Entry(i));
    EXPECT_FALSE(*consumer.Ready()) << i;
    producer.Publish();
    ASSERT_TRUE(*consumer.Ready()) << i;
    ASSERT_EQ(*consumer.Take(absl::MakeSpan(taken)), 1u) << i;
    EXPECT_EQ(taken[0].tag, i);
    EXPECT_FALSE(*consumer.Ready()) << i;
  }
}

TEST_F(QueueRingTest, AnImpossibleCompletionHeadIsCaught) {
  Make(8, 8);
  CompletionProducer completer(base(), geometry_);
  header()->cq_head.store(77);  // ahead of what the daemon produced
  EXPECT_EQ(completer.Space().status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(QueueRingTest, TheDaemonNeverReadsGeometryBackFromTheSegment) {
  Make(8, 8);
  SubmissionProducer producer(base());
  SubmissionConsumer consumer(base(), geometry_);
  CompletionProducer completer(base(), geometry_);
  CompletionConsumer reaper(base());  // before the scribbling
  // The client scribbles on the header: huge rings, offsets far away.
  header()->sq_entries = 1u << 30;
  header()->cq_entries = 1u << 30;
  header()->sq_offset = 1ull << 40;
  header()->cq_offset = 1ull << 40;
  header()->errors_offset = 1ull << 40;
  producer.Push(Entry(1));
  producer.Publish();
  SubmissionEntry taken[8];
  EXPECT_EQ(*consumer.Take(absl::MakeSpan(taken)), 1u);
  // Writing a completion with a message stays inside the real segment
  // (ASan would catch a write outside it).
  completer.Push(CompletionEntry{}, std::string(1000, 'x'));
  completer.Publish();
  CompletionEntry got[2];
  std::string messages[2];
  ASSERT_EQ(reaper.Poll(absl::MakeSpan(got), messages), 1u);
  // One word too long to fit: cut inside it, and said to be cut.
  EXPECT_EQ(messages[0],
            std::string(kErrorMessageSize - kCut.size(), 'x') + "...");
}

TEST_F(QueueRingTest, ALongMessageIsCutAtAWordAndSaysSo) {
  Make(8, 8);
  CompletionProducer completer(base(), geometry_);
  CompletionConsumer reaper(base());
  std::string words;
  while (words.size() < 2 * kErrorMessageSize) words += "region 'kv' was freed, ";
  const std::string short_one = "not found: region 'kv'";
  completer.Push(CompletionEntry{}, words);
  completer.Push(CompletionEntry{}, short_one);
  // Multi-byte characters across the cut: never split.
  std::string accents;
  while (accents.size() < 2 * kErrorMessageSize) accents += "\xc3\xa9";
  completer.Push(CompletionEntry{}, accents);
  completer.Publish();
  CompletionEntry got[4];
  std::string messages[4];
  ASSERT_EQ(reaper.Poll(absl::MakeSpan(got), messages), 3u);
  EXPECT_LE(messages[0].size(), kErrorMessageSize);
  ASSERT_TRUE(absl::EndsWith(messages[0], "...")) << messages[0];
  // What is kept is the message's start, up to a whole word.
  const std::string kept =
      messages[0].substr(0, messages[0].size() - kCut.size());
  EXPECT_TRUE(absl::StartsWith(words, kept)) << messages[0];
  EXPECT_TRUE(words[kept.size()] == ' ' || words[kept.size()] == ',')
      << "cut inside a word: " << messages[0];
  EXPECT_EQ(messages[1], short_one);
  EXPECT_LE(messages[2].size(), kErrorMessageSize);
  const std::string body = messages[2].substr(0, messages[2].size() - kCut.size());
  EXPECT_EQ(body.size() % 2, 0u) << "a character was split";
  EXPECT_TRUE(absl::EndsWith(messages[2], "..."));
}

TEST_F(QueueRingTest, SleepAndWakeFlags) {
  Make(8, 8);
  SubmissionProducer producer(base());
  SubmissionConsumer consumer(base(), geometry_);
  EXPECT_FALSE(*consumer.SleepUnlessWork()) << "nothing queued: sleep";
  EXPECT_EQ(header()->engine_sleeping.load(), 1u);
  producer.Push(Entry(1));
  EXPECT_TRUE(producer.Publish()) << "the engine sleeps: ring the doorbell";
  consumer.Awake();
  producer.Push(Entry(2));
  EXPECT_FALSE(producer.Publish()) << "the engine is awake: no doorbell";
  EXPECT_TRUE(*consumer.SleepUnlessWork()) << "work is waiting: stay up";
  EXPECT_EQ(header()->engine_sleeping.load(), 0u);

  CompletionProducer completer(base(), geometry_);
  CompletionConsumer reaper(base());
  EXPECT_FALSE(reaper.WaitUnlessReady()) << "nothing there: wait";
  completer.Push(CompletionEntry{}, "");
  EXPECT_TRUE(completer.Publish()) << "the client waits: wake it";
  reaper.Done();
  completer.Push(CompletionEntry{}, "");
  EXPECT_FALSE(completer.Publish());
  EXPECT_TRUE(reaper.WaitUnlessReady()) << "completions there: do not wait";
}

// Keeps the calling thread on the CPU it runs on now (so that the CPU
// hints compare equal), and lets it move again when it goes.
class PinnedHere {
 public:
  PinnedHere() : cpu_(::sched_getcpu()) {
    ::pthread_getaffinity_np(::pthread_self(), sizeof(saved_), &saved_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu_, &one);
    pinned_ = ::pthread_setaffinity_np(::pthread_self(), sizeof(one), &one) == 0;
    cpu_ = ::sched_getcpu();
  }
  ~PinnedHere() {
    ::pthread_setaffinity_np(::pthread_self(), sizeof(saved_), &saved_);
  }
  bool pinned() const { return pinned_; }
  int cpu() const { return cpu_; }

 private:
  int cpu_;
  cpu_set_t saved_;
  bool pinned_ = false;
};

TEST_F(QueueRingTest, EachSideSaysWhichCpuItRunsOn) {
  Make(8, 8);
  PinnedHere here;
  ASSERT_TRUE(here.pinned());
  EXPECT_FALSE(EngineRunsHere(base())) << "not known yet: the client spins";
  SetEngineCpu(base(), -1);
  EXPECT_FALSE(EngineRunsHere(base()));
  EXPECT_FALSE(ClientWaitsHere(base()));
  SetEngineCpu(base(), here.cpu() + 1);
  EXPECT_FALSE(EngineRunsHere(base()));
  SetEngineCpu(base(), here.cpu());
  EXPECT_TRUE(EngineRunsHere(base())) << "same CPU: the client must not spin";

  CompletionConsumer reaper(base());
  EXPECT_FALSE(reaper.WaitUnlessReady());  // goes to sleep, here
  EXPECT_TRUE(ClientWaitsHere(base()));
  header()->client_cpu.store(here.cpu() + 2);  // another CPU, plus one
  EXPECT_FALSE(ClientWaitsHere(base()));
  reaper.Done();
  EXPECT_FALSE(reaper.WaitUnlessReady());
  EXPECT_TRUE(ClientWaitsHere(base()));
  reaper.Done();
  EXPECT_FALSE(ClientWaitsHere(base()))
      << "awake again, the client is not to be yielded to";

  // Busy-polling, the client waits on no CPU; yielding, on this one.
  reaper.NotWaiting();
  EXPECT_EQ(header()->client_cpu.load(), 0);
  EXPECT_FALSE(ClientWaitsHere(base()));
  reaper.Yielding();
  EXPECT_EQ(header()->client_cpu.load(), here.cpu() + 1);
  EXPECT_TRUE(ClientWaitsHere(base())) << "yielding here: yield back to it";
  reaper.NotWaiting();
  EXPECT_FALSE(ClientWaitsHere(base()))
      << "a client that left the engine's CPU is not yielded to";
}

TEST_F(QueueRingTest, TheClientSaysWhereItWaitsOnlyWhenThatChanges) {
  // The engine reads client_cpu at every publish: a store per operation
  // would move its line between the cores every time.
  Make(8, 8);
  PinnedHere here;
  ASSERT_TRUE(here.pinned());
  CompletionConsumer reaper(base());
  reaper.Yielding();
  ASSERT_EQ(header()->client_cpu.load(), here.cpu() + 1);
  header()->client_cpu.store(-7);  // stands out if stored again
  reaper.Yielding();
  EXPECT_EQ(header()->client_cpu.load(), -7) << "unchanged: not stored";
  reaper.NotWaiting();
  EXPECT_EQ(header()->client_cpu.load(), 0) << "changed: stored";
  header()->client_cpu.store(-7);
  reaper.NotWaiting();
  EXPECT_EQ(header()->client_cpu.load(), -7);
  // Going to sleep always says where; waking up says it waits no more.
  EXPECT_FALSE(reaper.WaitUnlessReady());
  EXPECT_EQ(header()->client_cpu.load(), here.cpu() + 1);
  reaper.Done();
  EXPECT_EQ(header()->client_cpu.load(), 0);
}

TEST_F(QueueRingTest, StopIsVisibleWithItsStatus) {
  Make(8, 8);
  EXPECT_TRUE(StopStatus(base()).ok());
  StopQueue(base(), absl::DataLossError("the ring was overwritten"));
  const absl::Status s = StopStatus(base());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "the ring was overwritten");
  header()->stop_code = 999;  // a scribbled code still reads as a status
  EXPECT_EQ(StopStatus(base()).code(), absl::StatusCode::kUnknown);
}

}  // namespace
}  // namespace rdmad::queue
