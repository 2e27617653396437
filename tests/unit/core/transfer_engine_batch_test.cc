// TransferEngine::SubmitBatch's per-batch shortcuts change nothing a caller
// can tell: the quota admits and refuses exactly what transfer-by-transfer
// acquisition would, slots are back before anyone hears of a completion,
// inline completions come in submission order, a region looked up once is
// not trusted for a need it was not checked for, and a cache a queue keeps
// across batches sees every free and permission change before its next
// batch.
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

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class TransferEngineBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Allocate(kAlice, "src", 8192, 0600);
    Allocate(kAlice, "dst", 8192, 0600);
    Allocate(kAlice, "pub", 100, 0644);  // Bob may read it, not write it
    Allocate(kBob, "bobs", 100, 0600);
  }

  void Allocate(const Caller& owner, const char* name, uint64_t size,
                uint32_t mode) {
    ASSERT_TRUE(testing::AllocateNamed(regions_, owner, name, size, mode).ok())
        << name;
  }

  // An 8-byte WRITE (or READ) between `local` and `target` at `index` * 8;
  // `peer` empty: a target on this daemon.
  static TransferSpec Op(OpType op, const char* local, const char* target,
                         int index, const char* peer = "") {
    TransferSpec spec;
    spec.op = op;
    spec.local = {0, local};
    spec.local_offset = 8 * index;
    spec.remote.peer = peer;
    spec.remote.name = target;
    spec.remote.offset = 8 * index;
    spec.length = 8;
    return spec;
  }

  // Submits `specs` as one batch for `caller`; the results in the order
  // their `done` ran, with the index of each.
  struct Done {
    int index;
    absl::StatusOr<TransferResult> result;
    uint64_t in_flight;  // the caller's slots in use when it ran
  };
  // `cache`: kept across batches, as a queue keeps one (null: none).
  std::vector<Done> RunBatch(TransferEngine& engine, const Caller& caller,
                             std::vector<TransferSpec> specs,
                             RegionCache* cache = nullptr) {
    std::vector<TransferRequest> batch;
    for (size_t i = 0; i < specs.size(); ++i) {
      batch.push_back({std::move(specs[i]),
                       [this, &engine, caller, i](auto r) {
                         done_.push_back({static_cast<int>(i), std::move(r),
                                          engine.InFlight(caller.uid)});
                       }});
    }
    engine.SubmitBatch(caller, absl::MakeSpan(batch), absl::InfinitePast(),
                       cache);
    return std::move(done_);
  }

  // One operation as a batch of its own; its status.
  absl::Status RunOne(TransferEngine& engine, const Caller& caller,
                      TransferSpec spec, RegionCache* cache = nullptr) {
    std::vector<TransferSpec> specs;
    specs.push_back(std::move(spec));
    return RunBatch(engine, caller, std::move(specs), cache)[0].result.status();
  }

  char* Data(const char* name) {
    return (*regions_.FindForUse(kAlice, {0, name}))->data();
  }

  NullRegistrar registrar_;
  RegionTable regions_{&registrar_, RegionLimits{}};
  testing::HeldRemote remote_;
  std::vector<Done> done_;
};

// Copies on this daemon complete inline: each gives its slot back before
// the next takes one, so a quota of 2 admits a batch of 16 of them.
TEST_F(TransferEngineBatchTest, InlineCopiesShareOneQuotaSlot) {
  TransferEngine engine(&regions_, &remote_, {.max_in_flight_per_uid = 2});
  for (int i = 0; i < 16; ++i) Data("src")[8 * i] = static_cast<char>('a' + i);
  std::vector<TransferSpec> specs;
  for (int i = 0; i < 16; ++i) {
    specs.push_back(Op(OpType::kWrite, "src", "dst", i));
  }
  std::vector<Done> done = RunBatch(engine, kAlice, std::move(specs));
  ASSERT_EQ(done.size(), 16u);
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(done[i].index, i) << "inline completions in submission order";
    ASSERT_TRUE(done[i].result.ok()) << done[i].result.status();
    EXPECT_EQ(done[i].result->bytes, 8u);
    EXPECT_EQ(done[i].result->transport, TransportKind::kLocal);
    EXPECT_EQ(done[i].in_flight, 0u) << "slot given back before done ran";
    EXPECT_EQ(Data("dst")[8 * i], static_cast<char>('a' + i));
  }
  EXPECT_EQ(engine.InFlight(kAlice.uid), 0u);
  EXPECT_EQ(engine.counters().ops_ok, 16u);
  EXPECT_EQ(engine.counters().bytes_written, 128u);
}

// Remote transfers hold their slot until they complete: the quota refuses
// the third of three, as it would one at a time, and names the setting.
TEST_F(TransferEngineBatchTest, RemoteTransfersHoldASlotEach) {
  TransferEngine engine(&regions_, &remote_, {.max_in_flight_per_uid = 2});
  std::vector<TransferSpec> specs;
  for (int i = 0; i < 3; ++i) {
    specs.push_back(Op(OpType::kWrite, "src", "dst", i, "127.0.0.1:9"));
  }
  std::vector<Done> done = RunBatch(engine, kAlice, std::move(specs));
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].index, 2);
  EXPECT_EQ(done[0].result.status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(done[0].result.status().message(),
              HasSubstr("quota_transfers_per_uid"));
  EXPECT_EQ(remote_.held().size(), 2u);
  EXPECT_EQ(engine.InFlight(kAlice.uid), 2u);
  remote_.FinishAll();
  EXPECT_EQ(engine.InFlight(kAlice.uid), 0u);
}

// Remote transfers and copies mixed, quota 2: the copies run while one
// remote transfer holds a slot, and the copy after the second is refused
// (both slots held), exactly as transfer-by-transfer acquisition would.
TEST_F(TransferEngineBatchTest, MixedBatchAdmitsWhatOneAtATimeWould) {
  TransferEngine engine(&regions_, &remote_, {.max_in_flight_per_uid = 2});
  std::vector<TransferSpec> specs;
  specs.push_back(Op(OpType::kWrite, "src", "dst", 0, "127.0.0.1:9"));
  specs.push_back(Op(OpType::kWrite, "src", "dst", 1));
  specs.push_back(Op(OpType::kRead, "src", "dst", 2));
  specs.push_back(Op(OpType::kWrite, "src", "dst", 3, "127.0.0.1:9"));
  specs.push_back(Op(OpType::kWrite, "src", "dst", 4));
  std::vector<Done> done = RunBatch(engine, kAlice, std::move(specs));
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].index, 1);
  EXPECT_TRUE(done[0].result.ok()) << done[0].result.status();
  EXPECT_EQ(done[1].index, 2);
  EXPECT_TRUE(done[1].result.ok()) << done[1].result.status();
  EXPECT_EQ(done[2].index, 4);
  EXPECT_EQ(done[2].result.status().code(),
            absl::StatusCode::kResourceExhausted);
  for (const Done& d : done) EXPECT_EQ(d.in_flight, 2u);
  EXPECT_EQ(remote_.held().size(), 2u);
  remote_.FinishAll();
  EXPECT_EQ(engine.InFlight(kAlice.uid), 0u);
}

// A failed check gives its slot back to the batch: with a quota of 1, a
// batch of bad transfers followed by a good one runs the good one.
TEST_F(TransferEngineBatchTest, FailedChecksGiveTheirSlotBack) {
  TransferEngine engine(&regions_, &remote_, {.max_in_flight_per_uid = 1});
  std::vector<TransferSpec> specs;
  TransferSpec out_of_range = Op(OpType::kWrite, "src", "dst", 0);
  out_of_range.local_offset = 8190;
  specs.push_back(std::move(out_of_range));
  specs.push_back(Op(OpType::kWrite, "nosuch", "dst", 1));
  specs.push_back(Op(OpType::kWrite, "src", "nosuch", 2));
  specs.push_back(Op(OpType::kWrite, "src", "dst", 3, "127.0.0.1:9"));
  std::vector<Done> done = RunBatch(engine, kAlice, std::move(specs));
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].result.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(done[1].result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(done[2].result.status().code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(remote_.held().size(), 1u);
  EXPECT_EQ(engine.InFlight(kAlice.uid), 1u);
  remote_.FinishAll();
  EXPECT_EQ(engine.InFlight(kAlice.uid), 0u);
  EXPECT_EQ(engine.counters().ops_failed, 3u);
  EXPECT_EQ(engine.counters().ops_ok, 1u);
}

// A region found for one need is looked up again for another: Bob may
// read "pub", so a READ from it passes; the WRITE to it that follows in
// the same batch is refused, and so is the READ after it into "pub" as
// his local buffer (that needs write access to it).
TEST_F(TransferEngineBatchTest, ARegionIsCheckedForEachNeed) {
  TransferEngine engine(&regions_, &remote_);
  std::memset(Data("pub"), 'p', 100);
  std::vector<TransferSpec> specs;
  specs.push_back(Op(OpType::kRead, "bobs", "pub", 0));
  specs.push_back(Op(OpType::kWrite, "bobs", "pub", 1));
  specs.push_back(Op(OpType::kWrite, "pub", "bobs", 2));
  specs.push_back(Op(OpType::kRead, "pub", "bobs", 3));
  std::vector<Done> done = RunBatch(engine, kBob, std::move(specs));
  ASSERT_EQ(done.size(), 4u);
  std::vector<absl::StatusCode> codes;
  for (const Done& d : done) codes.push_back(d.result.status().code());
  EXPECT_THAT(codes, ElementsAre(absl::StatusCode::kOk,
                                 absl::StatusCode::kPermissionDenied,
                                 absl::StatusCode::kOk,
                                 absl::StatusCode::kPermissionDenied));
  EXPECT_EQ(Data("pub")[8], 'p') << "written by someone who may only read";
}

// Without a caller's cache, a region freed between two batches is not found
// by the second: nothing is kept from one batch to the next.
TEST_F(TransferEngineBatchTest, NothingIsCachedAcrossBatchesWithoutACache) {
  TransferEngine engine(&regions_, &remote_);
  EXPECT_TRUE(RunOne(engine, kAlice, Op(OpType::kWrite, "src", "dst", 0)).ok());
  ASSERT_TRUE(regions_.Free(kAlice, {0, "dst"}).ok());
  EXPECT_EQ(RunOne(engine, kAlice, Op(OpType::kWrite, "src", "dst", 0)).code(),
            absl::StatusCode::kNotFound);
}

// A queue's cache, kept across batches, sees a free before its next batch:
// the freed target is not found. The cache holds what it found until
// ForgetStale (which its keeper calls when the generation moves) lets a
// freed region's memory go.
TEST_F(TransferEngineBatchTest, AQueuesCacheSeesAFreeBeforeItsNextBatch) {
  TransferEngine engine(&regions_, &remote_);
  RegionCache cache;
  Data("src")[0] = 'x';
  ASSERT_TRUE(
      RunOne(engine, kAlice, Op(OpType::kWrite, "src", "dst", 0), &cache).ok());
  ASSERT_NE(cache.target.region, nullptr) << "the target was cached";
  std::weak_ptr<Region> target = cache.target.region;
  engine.ForgetStale(cache);
  EXPECT_NE(cache.target.region, nullptr)
      << "nothing moved the generation: the cache holds";
  ASSERT_TRUE(regions_.Free(kAlice, {0, "dst"}).ok());
  engine.ForgetStale(cache);
  EXPECT_TRUE(target.expired())
      << "a stale cache must let go of a freed region's memory";
  EXPECT_EQ(
      RunOne(engine, kAlice, Op(OpType::kWrite, "src", "dst", 0), &cache).code(),
      absl::StatusCode::kNotFound);
  // Nor a freed local buffer.
  ASSERT_TRUE(regions_.Free(kAlice, {0, "src"}).ok());
  EXPECT_EQ(
      RunOne(engine, kAlice, Op(OpType::kWrite, "src", "pub", 0), &cache).code(),
      absl::StatusCode::kNotFound);
}

// A permission change reaches the next batch of a queue that used the
// region under the old mode: Bob read "pub" (0644), Alice makes it 0600,
// and his next READ from it is refused.
TEST_F(TransferEngineBatchTest, AQueuesCacheSeesAPermissionChange) {
  TransferEngine engine(&regions_, &remote_);
  RegionCache cache;
  ASSERT_TRUE(
      RunOne(engine, kBob, Op(OpType::kRead, "bobs", "pub", 0), &cache).ok());
  ASSERT_TRUE(
      regions_.SetPermissions(kAlice, {0, "pub"}, 0600, std::nullopt).ok());
  const absl::Status refused =
      RunOne(engine, kBob, Op(OpType::kRead, "bobs", "pub", 0), &cache);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
}

// What moves the table's generation: frees (of a region, or of a session's
// buffers when there were any) and permission changes; not new regions,
// which cannot make a cached look-up wrong.
TEST_F(TransferEngineBatchTest, GenerationMovesOnFreesAndPermissionChanges) {
  uint64_t generation = regions_.generation();
  Allocate(kAlice, "more", 64, 0600);
  EXPECT_EQ(regions_.generation(), generation) << "a new region";
  EXPECT_EQ(regions_.FreeSession(999), 0u);
  EXPECT_EQ(regions_.generation(), generation) << "a session with no buffers";
  ASSERT_TRUE(
      regions_.SetPermissions(kAlice, {0, "more"}, 0640, std::nullopt).ok());
  EXPECT_GT(regions_.generation(), generation) << "a permission change";
  generation = regions_.generation();
  ASSERT_TRUE(regions_.Free(kAlice, {0, "more"}).ok());
  EXPECT_GT(regions_.generation(), generation) << "a free";
  generation = regions_.generation();
  AllocateOptions buffer;
  buffer.size = 64;
  ASSERT_TRUE(regions_.Allocate(kAlice, buffer).ok());
  EXPECT_EQ(regions_.FreeSession(kAlice.session_id), 1u);
  EXPECT_GT(regions_.generation(), generation) << "a session's buffers freed";
}

}  // namespace
}  // namespace rdmad::core
