// One-sided WRITE and READ between two QPs connected through one device,
// byte for byte at many sizes and offsets, inline and chained; and the
// failures a NIC reports: wrong rkeys, refused access, bounds, revoked
// registrations.
#include "tests/lab/verbs/verbs_lab_fixture.h"

namespace rdmad::verbs {
namespace {

using ::testing::HasSubstr;

// --- One-sided WRITE and READ ----------------------------------------------

struct TransferCase {
  size_t length;
  size_t local_offset;
  size_t remote_offset;
};

class TransferTest : public LoopbackTest,
                     public ::testing::WithParamInterface<TransferCase> {};

constexpr size_t kGuard = 64;
constexpr uint8_t kUntouched = 0xEE;

TEST_P(TransferTest, WriteThenReadByteForByte) {
  const TransferCase& c = GetParam();
  Buffer local =
      MakeBuffer(c.local_offset + c.length + kGuard, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(c.remote_offset + c.length + kGuard,
                             core::RemoteAccess::kReadWrite);
  ASSERT_NE(local.registration, nullptr);
  ASSERT_NE(remote.registration, nullptr);

  // WRITE: local[local_offset, +length) -> remote[remote_offset, +length).
  FillPattern(local.data() + c.local_offset, c.length, 1);
  std::fill(remote.bytes.begin(), remote.bytes.end(), kUntouched);
  absl::Status status =
      a_->PostWrite({.wr_id = 1,
                     .local_addr = local.data() + c.local_offset,
                     .length = static_cast<uint32_t>(c.length),
                     .lkey = local.lkey(),
                     .remote_addr = remote.addr(c.remote_offset),
                     .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  ibv_wc wc{};
  status = WaitA(&wc);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(Compare(remote.data() + c.remote_offset,
                    local.data() + c.local_offset, c.length),
            "");
  EXPECT_EQ(CheckFilled(remote.data(), c.remote_offset, kUntouched,
                        "before the written range"),
            "");
  EXPECT_EQ(CheckFilled(remote.data() + c.remote_offset + c.length, kGuard,
                        kUntouched, "after the written range"),
            "");

  // READ: remote[remote_offset, +length) -> local[local_offset, +length),
  // with fresh contents on the remote side.
  FillPattern(remote.data() + c.remote_offset, c.length, 2);
  std::fill(local.bytes.begin(), local.bytes.end(), kUntouched);
  status = a_->PostRead({.wr_id = 2,
                         .local_addr = local.data() + c.local_offset,
                         .length = static_cast<uint32_t>(c.length),
                         .lkey = local.lkey(),
                         .remote_addr = remote.addr(c.remote_offset),
                         .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA(&wc);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc.byte_len, c.length);
  EXPECT_EQ(Compare(local.data() + c.local_offset,
                    remote.data() + c.remote_offset, c.length),
            "");
  EXPECT_EQ(CheckFilled(local.data(), c.local_offset, kUntouched,
                        "before the read range"),
            "");
  EXPECT_EQ(CheckFilled(local.data() + c.local_offset + c.length, kGuard,
                        kUntouched, "after the read range"),
            "");
}

std::vector<TransferCase> TransferCases() {
  std::vector<TransferCase> cases;
  for (size_t length :
       {size_t{1}, size_t{4095}, size_t{65536}, size_t{(1 << 20) + 7}}) {
    cases.push_back({length, 0, 0});
    cases.push_back({length, 1, 3});     // both sides unaligned
    cases.push_back({length, 4093, 7});  // local crosses a page boundary
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, TransferTest, ::testing::ValuesIn(TransferCases()),
    [](const ::testing::TestParamInfo<TransferCase>& info) {
      return absl::StrCat(info.param.length, "B_local", info.param.local_offset,
                          "_remote", info.param.remote_offset);
    });

TEST_F(LoopbackTest, InlineWriteNeedsNoRegisteredSource) {
  ASSERT_GE(a_->max_inline_data(), 16u);
  Buffer remote = MakeBuffer(256, core::RemoteAccess::kWrite);
  std::fill(remote.bytes.begin(), remote.bytes.end(), kUntouched);
  // An unregistered stack buffer and no lkey: inline data is copied into
  // the work request, and the buffer is free as soon as the post returns.
  uint8_t source[64];
  const uint32_t length = std::min<uint32_t>(a_->max_inline_data(), 64);
  FillPattern(source, length, 3);
  uint8_t expected[64];
  std::memcpy(expected, source, length);
  absl::Status status = a_->PostWrite({.wr_id = 9,
                                       .local_addr = source,
                                       .length = length,
                                       .lkey = 0,
                                       .remote_addr = remote.addr(5),
                                       .rkey = remote.rkey(),
                                       .inline_data = true});
  ASSERT_TRUE(status.ok()) << status;
  std::memset(source, 0, sizeof(source));
  status = WaitA();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(Compare(remote.data() + 5, expected, length), "");
  EXPECT_EQ(CheckFilled(remote.data() + 5 + length, 16, kUntouched, "after"),
            "");
}

TEST_F(LoopbackTest, InlineChecksAreLocal) {
  uint8_t source[8] = {};
  absl::Status status = a_->PostRead({.local_addr = source,
                                      .length = 8,
                                      .remote_addr = 0,
                                      .rkey = 0,
                                      .inline_data = true});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> big(a_->max_inline_data() + 1);
  status = a_->PostWrite({.local_addr = big.data(),
                          .length = static_cast<uint32_t>(big.size()),
                          .inline_data = true});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("max_inline_data"));
  // Nothing reached the NIC: the QP is still usable.
  ExpectState(*a_, IBV_QPS_RTS);
}

TEST_F(LoopbackTest, ChainWithSelectiveSignalingCompletesOnce) {
  constexpr int kPieces = 16;
  constexpr uint32_t kPiece = 1000;
  Buffer local = MakeBuffer(kPieces * kPiece, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(kPieces * kPiece, core::RemoteAccess::kWrite);
  FillPattern(local.data(), local.bytes.size(), 4);
  std::vector<RdmaOp> ops;
  for (int i = 0; i < kPieces; ++i) {
    ops.push_back({.opcode = RdmaOp::Opcode::kWrite,
                   .wr_id = static_cast<uint64_t>(100 + i),
                   .local_addr = local.data() + i * kPiece,
                   .length = kPiece,
                   .lkey = local.lkey(),
                   .remote_addr = remote.addr(i * kPiece),
                   .rkey = remote.rkey(),
                   .signaled = i == kPieces - 1});
  }
  absl::Status status = a_->Post(ops);
  ASSERT_TRUE(status.ok()) << status;
  ibv_wc wc{};
  status = WaitA(&wc);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(wc.wr_id, 100u + kPieces - 1);
  // RC completes in order: the last one done means all are done.
  EXPECT_EQ(Compare(remote.data(), local.data(), local.bytes.size()), "");
  // No completion for the unsignaled ones.
  status = cq_a_->WaitOne(absl::Now() + absl::Milliseconds(200));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
}

TEST_F(LoopbackTest, ZeroLengthWriteCompletes) {
  Buffer remote = MakeBuffer(64, core::RemoteAccess::kWrite);
  absl::Status status = a_->PostWrite({.wr_id = 5,
                                       .length = 0,
                                       .remote_addr = remote.addr(0),
                                       .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA();
  EXPECT_TRUE(status.ok()) << status;
}

// --- Failures ----------------------------------------------------------------

TEST_F(LoopbackTest, WrongRkeyFailsWithRemoteAccessErrorAndQpGoesToError) {
  Buffer local = MakeBuffer(4096, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(4096, core::RemoteAccess::kReadWrite);
  FillPattern(local.data(), 4096, 5);
  std::fill(remote.bytes.begin(), remote.bytes.end(), kUntouched);
  // Flipping the low byte (the key part of an rkey) names no MR.
  absl::Status status = a_->PostWrite({.wr_id = 7,
                                       .local_addr = local.data(),
                                       .length = 4096,
                                       .lkey = local.lkey(),
                                       .remote_addr = remote.addr(0),
                                       .rkey = remote.rkey() ^ 0xff});
  ASSERT_TRUE(status.ok()) << status;
  ibv_wc wc{};
  status = WaitA(&wc);
  std::cout << "wrong rkey -> " << status << "\n";
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_THAT(status.message(),
              HasSubstr(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)));
  EXPECT_THAT(status.message(), HasSubstr("rkey"));
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(CheckFilled(remote.data(), 4096, kUntouched, "target"), "");
  ExpectState(*a_, IBV_QPS_ERR);

  // Work posted on a QP in ERR is flushed (or refused), never executed.
  status = a_->PostWrite({.wr_id = 8,
                          .local_addr = local.data(),
                          .length = 16,
                          .lkey = local.lkey(),
                          .remote_addr = remote.addr(0),
                          .rkey = remote.rkey()});
  if (status.ok()) {
    status = WaitA(&wc);
    std::cout << "post after error -> " << status << "\n";
    EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
    EXPECT_THAT(status.message(),
                HasSubstr(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR)));
  } else {
    std::cout << "post after error refused -> " << status << "\n";
  }
  EXPECT_EQ(CheckFilled(remote.data(), 4096, kUntouched, "target"), "");

  // Recovery as the pool will do it: reset both ends, exchange fresh
  // endpoints, connect again, and the same transfer works.
  ASSERT_TRUE(a_->Reset().ok());
  ASSERT_TRUE(b_->Reset().ok());
  while (cq_b_->Poll(absl::MakeSpan(&wc, 1)).value_or(0) > 0) {
  }
  while (cq_a_->Poll(absl::MakeSpan(&wc, 1)).value_or(0) > 0) {
  }
  ConnectPair();
  status = a_->PostWrite({.wr_id = 10,
                          .local_addr = local.data(),
                          .length = 4096,
                          .lkey = local.lkey(),
                          .remote_addr = remote.addr(0),
                          .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA(&wc);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(Compare(remote.data(), local.data(), 4096), "");
}

TEST_F(LoopbackTest, ReadOnlyRegionRefusesRemoteWrite) {
  Buffer local = MakeBuffer(256, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(256, core::RemoteAccess::kRead);
  std::fill(remote.bytes.begin(), remote.bytes.end(), kUntouched);
  FillPattern(local.data(), 256, 6);
  absl::Status status = a_->PostWrite({.wr_id = 11,
                                       .local_addr = local.data(),
                                       .length = 256,
                                       .lkey = local.lkey(),
                                       .remote_addr = remote.addr(0),
                                       .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_EQ(CheckFilled(remote.data(), 256, kUntouched, "read-only target"),
            "");
}

TEST_F(LoopbackTest, WriteOnlyRegionRefusesRemoteRead) {
  Buffer local = MakeBuffer(256, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(256, core::RemoteAccess::kWrite);
  absl::Status status = a_->PostRead({.wr_id = 12,
                                      .local_addr = local.data(),
                                      .length = 256,
                                      .lkey = local.lkey(),
                                      .remote_addr = remote.addr(0),
                                      .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
}

TEST_F(LoopbackTest, WritePastTheRegionEndIsRefused) {
  Buffer local = MakeBuffer(8192, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(4096, core::RemoteAccess::kReadWrite);
  absl::Status status = a_->PostWrite({.wr_id = 13,
                                       .local_addr = local.data(),
                                       .length = 4097,
                                       .lkey = local.lkey(),
                                       .remote_addr = remote.addr(0),
                                       .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
}

TEST_F(LoopbackTest, DeregisteredRegionRevokesItsRkey) {
  Buffer local = MakeBuffer(256, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(256, core::RemoteAccess::kReadWrite);
  const uint32_t stale_rkey = remote.rkey();
  const uint64_t stale_addr = remote.addr(0);
  remote.registration.reset();  // ibv_dereg_mr
  absl::Status status = a_->PostWrite({.wr_id = 14,
                                       .local_addr = local.data(),
                                       .length = 256,
                                       .lkey = local.lkey(),
                                       .remote_addr = stale_addr,
                                       .rkey = stale_rkey});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
}

// Layer 4: a VerbsChannel on an event loop of the I/O runtime, over QP a
// (connected to b on the same device), posting into a buffer registered
// for b's side.

}  // namespace
}  // namespace rdmad::verbs
