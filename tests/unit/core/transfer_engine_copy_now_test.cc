// TransferEngine::CopyNow, the ring engine's way to a region of this same
// daemon, decides exactly what SubmitBatch decides for the same request
// (status, message, bytes, effect on the data), holds a quota slot only
// while it runs, reports each copy once, notifies the target's owner of an
// immediate, and leaves a name the cluster directory may know to the batch
// path without doing or reporting anything.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "daemon/core/transfer_engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/callers.h"
#include "tests/unit/fakes/held_remote.h"
#include "tests/unit/fakes/region_fixtures.h"

namespace rdmad::core {
namespace {

using core::testing::kAlice;
using core::testing::kBob;

using ::testing::HasSubstr;

// One request, in both forms: what a ring names (LocalCopyRequest) and
// what the gRPC path decodes (TransferSpec).
struct Case {
  const char* what;
  Caller caller;
  OpType op;
  const char* local;  // a region name, or "" for an id nobody has
  uint64_t local_offset;
  TransferTarget target;
  uint64_t target_offset;
  uint64_t length;
};

class TransferEngineCopyNowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Allocate(kAlice, "src", 8192, 0600, RemoteAccess::kNone);
    Allocate(kAlice, "dst", 5000, 0600, RemoteAccess::kReadWrite);
    Allocate(kAlice, "ro", 100, 0644, RemoteAccess::kRead);
    Allocate(kBob, "bobs", 100, 0600, RemoteAccess::kNone);
    for (int i = 0; i < 8192; ++i) Data("src")[i] = static_cast<char>(i * 7);
  }

  void Allocate(const Caller& owner, const char* name, uint64_t size,
                uint32_t mode, RemoteAccess access) {
    ASSERT_TRUE(
        testing::AllocateNamed(regions_, owner, name, size, mode, access).ok())
        << name;
  }

  std::shared_ptr<Region> Find(const char* name) {
    std::shared_ptr<Region> region = testing::FindNamed(regions_, name);
    EXPECT_NE(region, nullptr) << name;
    return region;
  }
  char* Data(const char* name) { return Find(name)->data(); }
  uint64_t IdOf(const char* name) {
    return *name == '\0' ? 987654 : Find(name)->id();
  }

  static TransferTarget ByName(const char* name) {
    return testing::ByName(name);
  }
  TransferTarget ByDescriptor(const char* name, uint64_t key_xor = 0) {
    return testing::BySelfDescriptor(*Find(name), key_xor);
  }

  LocalCopyRequest AsCopy(const Case& c) {
    LocalCopyRequest r;
    r.op = c.op;
    r.local_id = IdOf(c.local);
    r.local_offset = c.local_offset;
    r.target = &c.target;
    r.target_offset = c.target_offset;
    r.length = c.length;
    return r;
  }
  TransferSpec AsSpec(const Case& c) {
    TransferSpec s;
    s.op = c.op;
    s.local = {IdOf(c.local), ""};
    s.local_offset = c.local_offset;
    s.remote = c.target;
    s.remote.offset = c.target_offset;
    s.length = c.length;
    return s;
  }

  absl::StatusOr<TransferResult> ThroughBatch(TransferEngine& engine,
                                              const Caller& caller,
                                              TransferSpec spec) {
    std::optional<absl::StatusOr<TransferResult>> out;
    engine.Submit(caller, std::move(spec),
                  [&](absl::StatusOr<TransferResult> r) { out = std::move(r); });
    EXPECT_TRUE(out.has_value()) << "a local copy completes inline";
    return out.has_value() ? *std::move(out)
                           : absl::InternalError("did not complete");
  }

  NullRegistrar registrar_;
  RegionTable regions_{&registrar_, RegionLimits{}};
  testing::HeldRemote remote_;
};

TEST_F(TransferEngineCopyNowTest, DecidesWhatTheBatchPathDecides) {
  const std::vector<Case> cases = {
      {"write by name", kAlice, OpType::kWrite, "src", 3, ByName("dst"), 17,
       1000},
      {"read by name", kAlice, OpType::kRead, "src", 100, ByName("dst"), 0, 64},
      {"to its own region", kAlice, OpType::kWrite, "src", 0, ByName("src"),
       4096, 4096},
      {"local range past the end", kAlice, OpType::kWrite, "src", 8190,
       ByName("dst"), 0, 8},
      {"target range past the end", kAlice, OpType::kWrite, "src", 0,
       ByName("dst"), 4999, 2},
      {"offset that wraps", kAlice, OpType::kRead, "src", 0, ByName("dst"),
       ~uint64_t{0} - 3, 8},
      {"zero length", kAlice, OpType::kWrite, "src", 0, ByName("dst"), 0, 0},
      {"no such local region", kAlice, OpType::kWrite, "", 0, ByName("dst"), 0,
       8},
      {"another user's local region", kBob, OpType::kWrite, "src", 0,
       ByName("bobs"), 0, 8},
      {"no such target", kAlice, OpType::kWrite, "src", 0, ByName("nope"), 0,
       8},
      {"target its mode keeps from Bob", kBob, OpType::kWrite, "bobs", 0,
       ByName("dst"), 0, 8},
      {"target Bob may read", kBob, OpType::kRead, "bobs", 0, ByName("ro"), 0,
       8},
      {"but not write", kBob, OpType::kWrite, "bobs", 0, ByName("ro"), 0, 8},
      {"no target named", kAlice, OpType::kWrite, "src", 0, TransferTarget{},
       0, 8},
      {"descriptor", kAlice, OpType::kWrite, "src", 9, ByDescriptor("dst"), 1,
       100},
      {"descriptor with a stale key", kAlice, OpType::kWrite, "src", 0,
       ByDescriptor("dst", 1), 0, 8},
      {"descriptor its export forbids", kAlice, OpType::kWrite, "src", 0,
       ByDescriptor("ro"), 0, 8},
      {"descriptor's mode forbids", kBob, OpType::kRead, "bobs", 0,
       ByDescriptor("dst"), 0, 8},
  };
  // Two engines over the same table, as a ring and the gRPC path would be;
  // a cache per caller, as each queue keeps one for its session.
  TransferEngine now_engine(&regions_, &remote_);
  TransferEngine batch_engine(&regions_, &remote_);
  RegionCache alices, bobs;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::memset(Data("dst"), 'd', 5000);
    std::memset(Data("ro"), 'r', 100);
    std::optional<absl::StatusOr<TransferResult>> now = now_engine.CopyNow(
        c.caller, AsCopy(c), TickClock::Now(),
        c.caller.uid == kAlice.uid ? alices : bobs);
    ASSERT_TRUE(now.has_value()) << "no directory: always decided here";
    const std::string dst_now(Data("dst"), 5000);
    const std::string src_now(Data("src"), 8192);
    std::memset(Data("dst"), 'd', 5000);
    std::memset(Data("ro"), 'r', 100);
    absl::StatusOr<TransferResult> batch =
        ThroughBatch(batch_engine, c.caller, AsSpec(c));
    EXPECT_EQ(now->status(), batch.status());
    if (batch.ok() && now->ok()) {
      EXPECT_EQ((*now)->bytes, batch->bytes);
      EXPECT_EQ((*now)->transport, TransportKind::kLocal);
      EXPECT_EQ((*now)->bytes, c.length);
    }
    EXPECT_EQ(dst_now, std::string(Data("dst"), 5000));
    EXPECT_EQ(src_now, std::string(Data("src"), 8192));
    EXPECT_EQ(Data("ro")[0], 'r');
  }
  // Counted the same way, every one once.
  EXPECT_EQ(now_engine.counters().ops_ok, batch_engine.counters().ops_ok);
  EXPECT_EQ(now_engine.counters().ops_failed,
            batch_engine.counters().ops_failed);
  EXPECT_EQ(now_engine.counters().bytes_written,
            batch_engine.counters().bytes_written);
  EXPECT_EQ(now_engine.counters().bytes_read,
            batch_engine.counters().bytes_read);
  EXPECT_EQ(now_engine.counters().ops_ok + now_engine.counters().ops_failed,
            cases.size());
  EXPECT_GT(now_engine.counters().ops_ok, 0u);
  EXPECT_GT(now_engine.counters().ops_failed, 0u);
}

TEST_F(TransferEngineCopyNowTest, MovesTheBytes) {
  TransferEngine engine(&regions_, &remote_);
  RegionCache cache;
  const Case write{"", kAlice, OpType::kWrite, "src", 5, ByName("dst"), 11, 300};
  auto done = engine.CopyNow(kAlice, AsCopy(write), TickClock::Now(), cache);
  ASSERT_TRUE(done.has_value() && done->ok());
  EXPECT_EQ(std::memcmp(Data("dst") + 11, Data("src") + 5, 300), 0);
  std::memset(Data("dst") + 2000, 'q', 10);
  const Case read{"", kAlice, OpType::kRead, "src", 0, ByName("dst"), 2000, 10};
  done = engine.CopyNow(kAlice, AsCopy(read), TickClock::Now(), cache);
  ASSERT_TRUE(done.has_value() && done->ok());
  EXPECT_EQ(std::string(Data("src"), 10), std::string(10, 'q'));
  EXPECT_EQ(engine.counters().bytes_written, 300u);
  EXPECT_EQ(engine.counters().bytes_read, 10u);
}

// The cache a queue keeps is not trusted past a free: the next copy looks
// the name up again and finds nothing.
TEST_F(TransferEngineCopyNowTest, ACachedTargetIsForgottenWhenFreed) {
  TransferEngine engine(&regions_, &remote_);
  RegionCache cache;
  const Case c{"", kAlice, OpType::kWrite, "src", 0, ByName("dst"), 0, 8};
  ASSERT_TRUE(engine.CopyNow(kAlice, AsCopy(c), TickClock::Now(), cache)->ok());
  ASSERT_TRUE(regions_.Free(kAlice, {0, "dst"}).ok());
  auto after = engine.CopyNow(kAlice, AsCopy(c), TickClock::Now(), cache);
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->status().code(), absl::StatusCode::kNotFound);
}

// One slot while it runs, back before it returns; none to take: refused,
// and reported as refused.
TEST_F(TransferEngineCopyNowTest, HoldsAQuotaSlotOnlyWhileItRuns) {
  TransferEngine engine(&regions_, &remote_, {.max_in_flight_per_uid = 1});
  RegionCache cache;
  const Case c{"", kAlice, OpType::kWrite, "src", 0, ByName("dst"), 0, 8};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(engine.CopyNow(kAlice, AsCopy(c), TickClock::Now(), cache)->ok());
    EXPECT_EQ(engine.InFlight(kAlice.uid), 0u);
  }
  // A remote transfer in flight holds the uid's only slot.
  TransferSpec remote;
  remote.local = {0, "src"};
  remote.remote.peer = "10.0.0.2:7471";
  remote.remote.name = "kv";
  remote.length = 8;
  engine.Submit(kAlice, std::move(remote), [](auto) {});
  ASSERT_EQ(engine.InFlight(kAlice.uid), 1u);
  auto refused = engine.CopyNow(kAlice, AsCopy(c), TickClock::Now(), cache);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused->status().message(), HasSubstr("quota_transfers_per_uid"));
  EXPECT_EQ(engine.InFlight(kAlice.uid), 1u);
  EXPECT_EQ(engine.counters().ops_failed, 1u);
  remote_.FinishAll();
  EXPECT_EQ(engine.InFlight(kAlice.uid), 0u);
  EXPECT_TRUE(engine.CopyNow(kAlice, AsCopy(c), TickClock::Now(), cache)->ok());
}

class RecordingObserver : public TransferObserver {
 public:
  void OnTransferDone(const TransferRecord& record) override {
    records.push_back({record.op, *record.peer, record.transport, record.bytes,
                       record.code});
  }
  struct Seen {
    OpType op;
    std::string peer;
    TransportKind transport;
    uint64_t bytes;
    absl::StatusCode code;
  };
  std::vector<Seen> records;
};

TEST_F(TransferEngineCopyNowTest, ReportsEachCopyOnce) {
  TransferEngine engine(&regions_, &remote_);
  RecordingObserver observer;
  engine.SetObserver(&observer);
  RegionCache cache;
  const Case ok{"", kAlice, OpType::kRead, "src", 0, ByName("dst"), 0, 40};
  const Case bad{"", kAlice, OpType::kWrite, "src", 0, ByName("dst"), 4990, 40};
  ASSERT_TRUE(engine.CopyNow(kAlice, AsCopy(ok), TickClock::Now(), cache)->ok());
  ASSERT_FALSE(engine.CopyNow(kAlice, AsCopy(bad), TickClock::Now(), cache)->ok());
  ASSERT_EQ(observer.records.size(), 2u);
  EXPECT_EQ(observer.records[0].op, OpType::kRead);
  EXPECT_EQ(observer.records[0].peer, "");
  EXPECT_EQ(observer.records[0].transport, TransportKind::kLocal);
  EXPECT_EQ(observer.records[0].bytes, 40u);
  EXPECT_EQ(observer.records[0].code, absl::StatusCode::kOk);
  EXPECT_EQ(observer.records[1].op, OpType::kWrite);
  EXPECT_EQ(observer.records[1].bytes, 0u);
  EXPECT_EQ(observer.records[1].code, absl::StatusCode::kOutOfRange);
  engine.SetObserver(nullptr);
}

// The ring engine copies first and reports after publishing the round's
// completions: CopyUnreported reports nothing, ReportCopy exactly what
// CopyNow would have.
TEST_F(TransferEngineCopyNowTest, CopyUnreportedLeavesTheReportToReportCopy) {
  TransferEngine engine(&regions_, &remote_);
  RecordingObserver observer;
  engine.SetObserver(&observer);
  RegionCache cache;
  const Case ok{"", kAlice, OpType::kWrite, "src", 8, ByName("dst"), 16, 40};
  const Case bad{"", kAlice, OpType::kWrite, "src", 0, ByName("dst"), 4990, 40};
  auto copied = engine.CopyUnreported(kAlice, AsCopy(ok), TickClock::Now(), cache);
  ASSERT_TRUE(copied.has_value() && copied->ok());
  EXPECT_EQ((*copied)->bytes, 40u);
  EXPECT_EQ(std::memcmp(Data("dst") + 16, Data("src") + 8, 40), 0)
      << "copied already";
  auto refused = engine.CopyUnreported(kAlice, AsCopy(bad), TickClock::Now(), cache);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(observer.records.empty());
  EXPECT_EQ(engine.counters().ops_ok + engine.counters().ops_failed, 0u);

  engine.ReportCopy(OpType::kWrite, *copied);
  engine.ReportCopy(OpType::kWrite, *refused);
  ASSERT_EQ(observer.records.size(), 2u);
  EXPECT_EQ(observer.records[0].code, absl::StatusCode::kOk);
  EXPECT_EQ(observer.records[0].bytes, 40u);
  EXPECT_EQ(observer.records[0].transport, TransportKind::kLocal);
  EXPECT_EQ(observer.records[1].code, absl::StatusCode::kOutOfRange);
  EXPECT_EQ(engine.counters().ops_ok, 1u);
  EXPECT_EQ(engine.counters().ops_failed, 1u);
  EXPECT_EQ(engine.counters().bytes_written, 40u);
  engine.SetObserver(nullptr);
}

class RecordingSink : public NotificationSink {
 public:
  void Notify(const Region& region, uint64_t offset, uint64_t length,
              uint32_t immediate, const NotificationWriter& writer) override {
    seen.push_back({region.id(), offset, length, immediate, writer});
  }
  struct Seen {
    uint64_t region, offset, length;
    uint32_t immediate;
    NotificationWriter writer;
  };
  std::vector<Seen> seen;
};

TEST_F(TransferEngineCopyNowTest, AnImmediateIsAnnouncedAfterTheData) {
  TransferEngine engine(&regions_, &remote_);
  RecordingSink sink;
  engine.SetNotificationSink(&sink);
  RegionCache cache;
  const Case c{"", kAlice, OpType::kWrite, "src", 0, ByName("dst"), 64, 16};
  LocalCopyRequest with = AsCopy(c);
  with.immediate = 0xfeedbeef;
  ASSERT_TRUE(engine.CopyNow(kAlice, with, TickClock::Now(), cache)->ok());
  ASSERT_EQ(sink.seen.size(), 1u);
  EXPECT_EQ(sink.seen[0].region, IdOf("dst"));
  EXPECT_EQ(sink.seen[0].offset, 64u);
  EXPECT_EQ(sink.seen[0].length, 16u);
  EXPECT_EQ(sink.seen[0].immediate, 0xfeedbeefu);
  EXPECT_EQ(sink.seen[0].writer.transport, TransportKind::kLocal);
  EXPECT_EQ(sink.seen[0].writer.uid, kAlice.uid) << "who wrote";
  EXPECT_EQ(sink.seen[0].writer.address, nullptr)
      << "left to the sink: this daemon's own";
  // A failed copy announces nothing.
  with.target_offset = 4999;
  ASSERT_FALSE(engine.CopyNow(kAlice, with, TickClock::Now(), cache)->ok());
  EXPECT_EQ(sink.seen.size(), 1u);
}

class NeverAsked : public RegionResolver {
 public:
  void Resolve(const std::string&, absl::Time, DirectoryGeneration,
               ResolveDone done) override {
    ++asked;
    done(absl::NotFoundError("not in the directory either"));
  }
  std::string self_node() const override { return "127.0.0.1:1"; }
  int asked = 0;
};

// A name with no region here, with a directory to ask: not decided here,
// nothing done, nothing counted, the slot given back; the batch path then
// asks the directory.
TEST_F(TransferEngineCopyNowTest, ANameNotHereIsLeftToTheDirectory) {
  TransferEngine engine(&regions_, &remote_, {.max_in_flight_per_uid = 4});
  NeverAsked directory;
  engine.SetDirectory(&directory);
  RegionCache cache;
  const Case c{"", kAlice, OpType::kWrite, "src", 0, ByName("elsewhere"), 0,
               8};
  EXPECT_FALSE(engine.CopyNow(kAlice, AsCopy(c), TickClock::Now(), cache)
                   .has_value());
  EXPECT_EQ(engine.counters().ops_ok + engine.counters().ops_failed, 0u);
  EXPECT_EQ(engine.InFlight(kAlice.uid), 0u);
  EXPECT_EQ(directory.asked, 0);
  // A local-side failure is still decided here, as the batch decides it
  // before looking at the target.
  const Case bad{"", kAlice, OpType::kWrite, "src", 8190, ByName("elsewhere"),
                 0, 8};
  auto refused = engine.CopyNow(kAlice, AsCopy(bad), TickClock::Now(), cache);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status().code(), absl::StatusCode::kOutOfRange);
  // Names that are here are copied here.
  const Case here{"", kAlice, OpType::kWrite, "src", 0, ByName("dst"), 0, 8};
  EXPECT_TRUE(engine.CopyNow(kAlice, AsCopy(here), TickClock::Now(), cache)->ok());
  engine.SetDirectory(nullptr);
}

}  // namespace
}  // namespace rdmad::core
