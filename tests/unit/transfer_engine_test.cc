#include "daemon/core/transfer_engine.h"

#include <cstring>
#include <limits>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/held_remote.h"

namespace rdmad::core {
namespace {

using ::testing::HasSubstr;

constexpr Caller kAlice{1, 1000, 1000, 11};

class TransferEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AllocateOptions src;
    src.name = "src";
    src.size = 8192;
    src.daemon_owned = true;
    ASSERT_TRUE(regions_.Allocate(kAlice, src).ok());
    AllocateOptions dst = src;
    dst.name = "dst";
    dst.size = 5000;
    dst.export_access = RemoteAccess::kReadWrite;
    ASSERT_TRUE(regions_.Allocate(kAlice, dst).ok());
    AllocateOptions ro = src;
    ro.name = "ro";
    ro.size = 100;
    ro.export_access = RemoteAccess::kRead;
    ASSERT_TRUE(regions_.Allocate(kAlice, ro).ok());
  }

  absl::StatusOr<TransferResult> Run(TransferSpec spec) {
    std::optional<absl::StatusOr<TransferResult>> out;
    engine_.Submit(kAlice, std::move(spec),
                   [&](absl::StatusOr<TransferResult> r) { out = std::move(r); });
    EXPECT_TRUE(out.has_value()) << "local transfers complete inline";
    return *std::move(out);
  }

  char* Data(const char* name) {
    return (*regions_.FindForUse(kAlice, {0, name}))->data();
  }

  static TransferSpec Op(OpType op, uint64_t local_offset, const char* remote,
                         uint64_t remote_offset, uint64_t length) {
    TransferSpec r;
    r.op = op;
    r.local = {0, "src"};
    r.local_offset = local_offset;
    r.remote.name = remote;
    r.remote.offset = remote_offset;
    r.length = length;
    return r;
  }

  NullRegistrar registrar_;
  RegionTable regions_{&registrar_, RegionLimits{}};
  testing::HeldRemote remote_;
  TransferEngine engine_{&regions_, &remote_};
};

TEST_F(TransferEngineTest, WriteThenReadBackAtUnalignedOffsets) {
  for (int i = 0; i < 8192; ++i) Data("src")[i] = static_cast<char>(i * 7);
  auto w = Run(Op(OpType::kWrite, 3, "dst", 1001, 3999));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->bytes, 3999u);
  EXPECT_EQ(std::memcmp(Data("dst") + 1001, Data("src") + 3, 3999), 0);

  std::memset(Data("src"), 0, 8192);
  auto r = Run(Op(OpType::kRead, 4000, "dst", 1001, 3999));
  ASSERT_TRUE(r.ok()) << r.status();
  for (int i = 0; i < 3999; ++i) {
    ASSERT_EQ(Data("src")[4000 + i], static_cast<char>((i + 3) * 7)) << i;
  }
  EXPECT_EQ(engine_.counters().ops_ok, 2u);
  EXPECT_EQ(engine_.counters().bytes_written, 3999u);
  EXPECT_EQ(engine_.counters().bytes_read, 3999u);
}

TEST_F(TransferEngineTest, BoundsAreCheckedOnBothSides) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(Run(Op(OpType::kWrite, 0, "dst", 0, 5001)).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Run(Op(OpType::kWrite, 8000, "dst", 0, 200)).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Run(Op(OpType::kWrite, 0, "dst", kMax, 2)).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Run(Op(OpType::kRead, kMax - 10, "dst", 0, 20)).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Run(Op(OpType::kWrite, 0, "dst", 0, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Run(Op(OpType::kWrite, 0, "dst", 4999, 2)).status().message(),
              HasSubstr("5000 bytes"));
  EXPECT_EQ(engine_.counters().ops_failed, 6u);
}

// A copy between two regions of this daemon: local permissions decide, as
// for a mapping; the target need not be exported for its owner.
TEST_F(TransferEngineTest, LocalTargetNeedsLocalAccessNotExport) {
  std::memset(Data("ro"), 'r', 100);
  std::memset(Data("src"), 's', 100);
  // "src" is not exported at all, "ro" only for reading by peers: their
  // owner still copies into both.
  ASSERT_TRUE(Run(Op(OpType::kWrite, 0, "ro", 0, 10)).ok());
  EXPECT_EQ(Data("ro")[0], 's');
  AllocateOptions other;
  other.name = "other";
  other.size = 100;
  other.daemon_owned = true;
  ASSERT_TRUE(regions_.Allocate(kAlice, other).ok());
  ASSERT_TRUE(Run(Op(OpType::kWrite, 0, "other", 0, 10)).ok());
  EXPECT_EQ(Data("other")[9], 's');
  EXPECT_EQ(Run(Op(OpType::kRead, 0, "nope", 0, 10)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(TransferEngineTest, RemoteTransfersGoDownAsOneCheckedBatch) {
  std::vector<TransferRequest> batch;
  std::vector<absl::StatusOr<TransferResult>> results(4, absl::UnknownError(""));
  for (int i = 0; i < 4; ++i) {
    TransferSpec spec = Op(OpType::kWrite, 100 * i, "dst", 0, 10);
    spec.remote.peer = "127.0.0.1:9";
    if (i == 2) spec.local_offset = 8190;  // fails its local check
    batch.push_back({std::move(spec), [&results, i](auto r) {
                       results[i] = std::move(r);
                     }});
  }
  engine_.SubmitBatch(kAlice, absl::MakeSpan(batch));
  // One batch with the three good ones, checked: the local region is
  // resolved and the range inside it.
  ASSERT_EQ(remote_.batch_sizes(), std::vector<size_t>{3});
  ASSERT_EQ(remote_.held().size(), 3u);
  for (const Transfer& t : remote_.held()) {
    EXPECT_EQ(t.local->name(), "src");
    EXPECT_EQ(t.uid, kAlice.uid);
    EXPECT_EQ(t.remote.peer, "127.0.0.1:9");
    EXPECT_EQ(t.length, 10u);
  }
  EXPECT_EQ(results[2].status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(engine_.InFlight(kAlice.uid), 3u);
  remote_.FinishAll();
  for (int i : {0, 1, 3}) EXPECT_TRUE(results[i].ok()) << results[i].status();
  EXPECT_EQ(engine_.InFlight(kAlice.uid), 0u);
  EXPECT_EQ(engine_.counters().ops_ok, 3u);
  EXPECT_EQ(engine_.counters().ops_failed, 1u);
}

TEST_F(TransferEngineTest, RemoteWithoutATransportIsAFailedPrecondition) {
  TransferEngine bare(&regions_, nullptr);
  TransferSpec spec = Op(OpType::kWrite, 0, "dst", 0, 10);
  spec.remote.peer = "127.0.0.1:9";
  std::optional<absl::StatusOr<TransferResult>> out;
  bare.Submit(kAlice, std::move(spec),
              [&](absl::StatusOr<TransferResult> r) { out = std::move(r); });
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(bare.InFlight(kAlice.uid), 0u);
}

// Someone without local access reaches a region only as far as it is
// exported, as a peer would.
TEST_F(TransferEngineTest, OthersNeedTheExportAccess) {
  constexpr Caller kBob{2, 2000, 2000, 22};
  AllocateOptions mine;
  mine.name = "bobs";
  mine.size = 100;
  mine.daemon_owned = true;
  ASSERT_TRUE(regions_.Allocate(kBob, mine).ok());
  auto run = [&](OpType op, const char* target) {
    TransferSpec r = Op(op, 0, target, 0, 10);
    r.local = {0, "bobs"};
    std::optional<absl::StatusOr<TransferResult>> out;
    engine_.Submit(kBob, std::move(r), [&](absl::StatusOr<TransferResult> result) {
      out = std::move(result);
    });
    EXPECT_TRUE(out.has_value());
    return *std::move(out);
  };
  std::memset(Data("ro"), 'r', 100);
  auto w = run(OpType::kWrite, "ro");
  EXPECT_EQ(w.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Data("ro")[0], 'r');  // untouched
  EXPECT_TRUE(run(OpType::kRead, "ro").ok());
  EXPECT_EQ(run(OpType::kRead, "src").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(run(OpType::kWrite, "dst").ok());
}

TEST_F(TransferEngineTest, LocalRegionMustBeTheCallers) {
  TransferSpec r = Op(OpType::kWrite, 0, "dst", 0, 10);
  std::optional<absl::StatusOr<TransferResult>> out;
  engine_.Submit(Caller{9, 4242, 4242, 9}, std::move(r),
                 [&](absl::StatusOr<TransferResult> res) { out = std::move(res); });
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace rdmad::core
