// The data path end to end: real rdmad daemons as child processes on
// loopback, driven through the client library. On the host the daemons use
// the TCP transport; the soft-RoCE lab runs this same binary inside a VM
// with RDMAD_TEST_TRANSPORT=verbs, so every case below also runs over RC QPs
// on rdma_rxe.
//
//   - patterns written to a remote region and read back byte-identical for
//     1 B .. 64 MiB at unaligned offsets, by name and by descriptor;
//   - several clients at once;
//   - write to a read-only export -> PERMISSION_DENIED, and the next
//     transfer still works; out of bounds -> OUT_OF_RANGE;
//   - three daemons (A writes to B and C);
//   - a peer stopped (SIGSTOP) -> TCP: DEADLINE_EXCEEDED within the
//     deadline; verbs: the transfer succeeds, since one-sided RDMA needs no
//     remote CPU; a peer
//     SIGKILLed mid-transfer -> the transfer fails within its deadline, and
//     once it is restarted on the same port transfers work again without
//     restarting the local daemon.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/unique_fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"

namespace rdmad {
namespace {

using ::rdmad::testing::Connect;
using ::rdmad::testing::DaemonOptions;
using ::rdmad::testing::DaemonProcess;
using ::rdmad::testing::Remote;
using ::rdmad::testing::StartDaemonOrNull;
using ::rdmad::testing::TempDir;
using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;

bool Verbs() { return ::rdmad::testing::TestTransport() == "verbs"; }
Transport ExpectedTransport() {
  return Verbs() ? Transport::kVerbs : Transport::kTcp;
}

void Fill(char* p, uint64_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x1234567;
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
  for (; i < n; ++i) p[i] = static_cast<char>(x >> (8 * (i % 8)));
}

// First differing byte, or -1.
int64_t FirstDifference(const char* a, const char* b, uint64_t n) {
  if (std::memcmp(a, b, n) == 0) return -1;
  for (uint64_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

class TransferTest : public ::testing::Test {
 protected:
  // The TCP transport pins nothing, but the region table counts against
  // RLIMIT_MEMLOCK (often 8 MiB in containers): lift the budget.
  static constexpr char kConfig[] = "max_pinned_bytes: 4294967296\n";

  std::unique_ptr<DaemonProcess> StartDaemon(const std::string& name) {
    return StartDaemonOrNull(dir_, name, {.config = kConfig});
  }

  // A daemon whose data port stays the same across Restart, as a
  // configured data_listen does (the default picks a new one each start).
  std::unique_ptr<DaemonProcess> StartDaemonOnAFixedDataPort(
      const std::string& name) {
    absl::StatusOr<std::unique_ptr<DaemonProcess>> daemon;
    // The port was free a moment ago; another test may take it first.
    for (int attempt = 0; attempt < 5; ++attempt) {
      DaemonOptions options;
      options.config = kConfig;
      options.extra_args = {
          "--data_listen",
          absl::StrCat("127.0.0.1:", testing::FreeLoopbackPort())};
      daemon = DaemonProcess::Start(dir_.path(), name, options);
      if (daemon.ok() ||
          !absl::StrContains(daemon.status().message(), "cannot listen")) {
        break;
      }
    }
    EXPECT_TRUE(daemon.ok()) << daemon.status();
    return daemon.ok() ? *std::move(daemon) : nullptr;
  }

  // Makes region `name` on `daemon` from a client that then goes away (the
  // region is the daemon's, as CreateRegion makes it).
  static void CreateRegionOn(DaemonProcess& daemon, const std::string& name,
                             uint64_t size) {
    auto client = Connect(daemon);
    ASSERT_TRUE(client);
    auto created = client->CreateRegion(name, size, Access::kReadWrite);
    ASSERT_TRUE(created.ok()) << created.status();
  }

  // Expects region `name` on `daemon` to start with `want`'s `size` bytes.
  static void ExpectRegionHolds(DaemonProcess& daemon, const std::string& name,
                                const char* want, uint64_t size) {
    auto client = Connect(daemon);
    ASSERT_TRUE(client);
    auto view = client->MapRegion(name);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(FirstDifference(want, view->data(), size), -1);
  }

  TempDir dir_;
};

TEST_F(TransferTest, PatternsRoundTripAtUnalignedOffsets) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  auto ca = Connect(*a);
  auto cb = Connect(*b);
  ASSERT_TRUE(ca && cb);
  constexpr uint64_t kRegion = 80 * kMiB;
  ASSERT_TRUE(cb->CreateRegion("dst", kRegion, Access::kReadWrite).ok());
  auto view = cb->MapRegion("dst");  // to check what landed on B
  ASSERT_TRUE(view.ok()) << view.status();
  auto buf = ca->Allocate(2 * kRegion);
  ASSERT_TRUE(buf.ok()) << buf.status();

  const uint64_t sizes[] = {1, 4095, 64 << 10, kMiB + 7, 64 * kMiB};
  uint64_t seed = 0;
  for (uint64_t size : sizes) {
    SCOPED_TRACE(absl::StrCat("size ", size));
    ++seed;
    const uint64_t local_off = 13 + seed;       // unaligned everywhere
    const uint64_t remote_off = 4097 * seed + 3;
    const uint64_t back_off = kRegion + 1001 + seed;
    Fill(buf->data() + local_off, size, seed);
    auto w = ca->Write(*buf, local_off, Remote(*b, "dst"), remote_off, size);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->bytes, size);
    EXPECT_EQ(w->transport, ExpectedTransport());
    ASSERT_EQ(FirstDifference(buf->data() + local_off,
                              view->data() + remote_off, size),
              -1);
    std::memset(buf->data() + back_off, 0, size);
    auto r = ca->Read(*buf, back_off, Remote(*b, "dst"), remote_off, size);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(FirstDifference(buf->data() + local_off, buf->data() + back_off,
                              size),
              -1);
  }

  // The same through an out-of-band descriptor.
  auto descriptor = cb->GetDescriptor("dst");
  ASSERT_TRUE(descriptor.ok()) << descriptor.status();
  RemoteRegion by_descriptor;
  by_descriptor.descriptor = *descriptor;
  Fill(buf->data(), 3 * kMiB, 77);
  ASSERT_TRUE(ca->Write(*buf, 0, by_descriptor, 5, 3 * kMiB).ok());
  EXPECT_EQ(FirstDifference(buf->data(), view->data() + 5, 3 * kMiB), -1);

  auto peers = ca->ListPeers();
  ASSERT_TRUE(peers.ok());
  ASSERT_EQ(peers->size(), 1u);
  EXPECT_EQ((*peers)[0].address, b->peer_address());
  EXPECT_EQ((*peers)[0].transport, ExpectedTransport());
  EXPECT_EQ((*peers)[0].state, PeerState::kReady);
  EXPECT_GE((*peers)[0].ops_completed, 11u);
  auto qps = ca->ListQps();
  ASSERT_TRUE(qps.ok());
  if (Verbs()) {
    // A verbs pool is sized by its traffic: one QP at first, at most
    // qps_per_peer (4).
    EXPECT_GE(qps->size(), 1u);
    EXPECT_LE(qps->size(), 4u);
  } else {
    EXPECT_EQ(qps->size(), 4u);
  }
  auto status = ca->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->peer_count, 1u);
}

// A Batch of many small WRITEs lands byte-identical, each at its own
// offset; on verbs the operations go out in ibv_post_send chains (fewer
// post calls than operations), not one doorbell each.
TEST_F(TransferTest, BatchOfSmallWritesLandsAndIsChained) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  constexpr int kOps = 64;
  constexpr uint64_t kLen = 200;  // small: inline on rxe
  constexpr uint64_t kStride = 4099;
  {
    auto cb = Connect(*b);
    ASSERT_TRUE(cb);
    ASSERT_TRUE(
        cb->CreateRegion("dst", kOps * kStride, Access::kReadWrite).ok());
  }
  auto ca = Connect(*a);
  ASSERT_TRUE(ca);
  auto src = ca->Allocate(kOps * kStride);
  auto back = ca->Allocate(kOps * kStride);
  ASSERT_TRUE(src.ok() && back.ok());
  Fill(src->data(), kOps * kStride, 41);
  std::memset(back->data(), 0, kOps * kStride);
  // Warm up: connect and resolve, so that the batch below reaches the
  // channel synchronously.
  ASSERT_TRUE(ca->Write(*src, 0, Remote(*b, "dst"), 0, 1).ok());
  auto PostCalls = [&]() -> uint64_t {
    auto qps = ca->ListQps();
    EXPECT_TRUE(qps.ok()) << qps.status();
    uint64_t calls = 0;
    for (const auto& q : *qps) calls += q.post_calls;
    return calls;
  };
  const uint64_t calls_before = PostCalls();

  const RemoteRegion dst = Remote(*b, "dst");
  std::vector<Op> ops;
  for (int i = 0; i < kOps; ++i) {
    const uint64_t offset = i * kStride + i % 7;  // unaligned
    ops.push_back({.kind = Op::Kind::kWrite,
                   .local = &*src,
                   .local_offset = offset,
                   .remote = &dst,
                   .remote_offset = offset,
                   .length = kLen});
  }
  auto results = ca->Batch(ops);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), kOps);
  for (int i = 0; i < kOps; ++i) {
    EXPECT_TRUE((*results)[i].status.ok())
        << "op " << i << ": " << (*results)[i].status;
  }
  const uint64_t calls = PostCalls() - calls_before;

  for (int i = 0; i < kOps; ++i) {
    const uint64_t offset = i * kStride + i % 7;
    ASSERT_TRUE(
        ca->Read(*back, offset, Remote(*b, "dst"), offset, kLen).ok());
    ASSERT_EQ(FirstDifference(src->data() + offset, back->data() + offset,
                              kLen),
              -1)
        << "op " << i;
  }
  // The batch reaches the channel as one Post. Verbs: 4 QPs, chains of up
  // to 16 WRs, so 4 ibv_post_send calls. TCP: 4 connections, each writing
  // its 16 frames with one sendmsg. One call per operation would be 64.
  EXPECT_GT(calls, 0u);
  EXPECT_LE(calls, kOps / 4) << "a batch of " << kOps << " small writes took "
                             << calls << (Verbs() ? " ibv_post_send" : " sendmsg")
                             << " calls";
}

// Unexport and free revoke a peer's access, also for a peer that holds the
// old key in a descriptor and sends straight to it: on verbs the export's
// MR is deregistered, so the remote NIC itself refuses the old rkey, and
// the region's bytes stay untouched.
TEST_F(TransferTest, UnexportAndFreeRevokeAnOldDescriptor) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  constexpr uint64_t kSize = 64 * 1024;
  auto cb = Connect(*b);
  ASSERT_TRUE(cb);
  ASSERT_TRUE(cb->CreateRegion("kv", kSize, Access::kReadWrite).ok());
  auto view = cb->MapRegion("kv");
  ASSERT_TRUE(view.ok()) << view.status();
  std::memset(view->data(), 0, kSize);
  auto descriptor = cb->GetDescriptor("kv");
  ASSERT_TRUE(descriptor.ok()) << descriptor.status();
  RemoteRegion old_key;
  old_key.descriptor = *descriptor;

  auto ca = Connect(*a);
  ASSERT_TRUE(ca);
  auto buf = ca->Allocate(kSize);
  ASSERT_TRUE(buf.ok());
  std::memset(buf->data(), 0x11, kSize);
  ASSERT_TRUE(ca->Write(*buf, 0, old_key, 0, kSize).ok());
  ASSERT_EQ(static_cast<unsigned char>(view->data()[kSize - 1]), 0x11);

  // Unexported: the old key no longer reaches the memory.
  ASSERT_TRUE(cb->Export("kv", Access::kNone).ok());
  std::memset(buf->data(), 0x22, kSize);
  auto w = ca->Write(*buf, 0, old_key, 0, kSize);
  ASSERT_FALSE(w.ok()) << "a write with the old key went through";
  EXPECT_THAT(w.status().code(), AnyOf(absl::StatusCode::kNotFound,
                                       absl::StatusCode::kPermissionDenied))
      << w.status();
  for (uint64_t i = 0; i < kSize; ++i) {
    ASSERT_EQ(static_cast<unsigned char>(view->data()[i]), 0x11)
        << "byte " << i << " changed after unexport";
  }

  // Exported again: a new key; the old descriptor stays dead, the name works.
  ASSERT_TRUE(cb->Export("kv", Access::kReadWrite).ok());
  w = ca->Write(*buf, 0, old_key, 0, kSize);
  EXPECT_FALSE(w.ok()) << "the old key works again after re-export";
  ASSERT_TRUE(ca->Write(*buf, 0, Remote(*b, "kv"), 0, kSize).ok())
      << "the channel did not survive the refusals";
  EXPECT_EQ(static_cast<unsigned char>(view->data()[0]), 0x22);

  // Freed: neither the name nor a fresh descriptor reaches it.
  auto fresh = cb->GetDescriptor("kv");
  ASSERT_TRUE(fresh.ok());
  RemoteRegion fresh_key;
  fresh_key.descriptor = *fresh;
  view = absl::InternalError("unmapped");  // drop our view before freeing
  ASSERT_TRUE(cb->FreeRegion("kv").ok());
  EXPECT_FALSE(ca->Read(*buf, 0, fresh_key, 0, kSize).ok());
  auto r = ca->Read(*buf, 0, Remote(*b, "kv"), 0, kSize);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
}

TEST_F(TransferTest, SeveralClientsAtOnce) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  auto cb = Connect(*b);
  ASSERT_TRUE(cb);
  constexpr int kClients = 4;
  constexpr uint64_t kSlice = 8 * kMiB;
  ASSERT_TRUE(
      cb->CreateRegion("shared", kClients * kSlice, Access::kReadWrite).ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto client = Connect(*a);
      if (!client) {
        failures++;
        return;
      }
      auto buf = client->Allocate(2 * kSlice);
      if (!buf.ok()) {
        failures++;
        return;
      }
      std::mt19937_64 rng(c);
      for (int i = 0; i < 25; ++i) {
        const uint64_t len = 1 + rng() % kSlice;
        const uint64_t off = rng() % (kSlice - len + 1);
        Fill(buf->data(), len, c * 1000 + i);
        auto w = client->Write(*buf, 0, Remote(*b, "shared"),
                               c * kSlice + off, len);
        auto r = client->Read(*buf, kSlice, Remote(*b, "shared"),
                              c * kSlice + off, len);
        if (!w.ok() || !r.ok() ||
            FirstDifference(buf->data(), buf->data() + kSlice, len) != -1) {
          ADD_FAILURE() << "client " << c << " round " << i << ": "
                        << w.status() << " / " << r.status();
          failures++;
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(TransferTest, ViolationsReportedAndChannelSurvives) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  auto ca = Connect(*a);
  auto cb = Connect(*b);
  ASSERT_TRUE(ca && cb);
  ASSERT_TRUE(cb->CreateRegion("ro", kMiB, Access::kRead).ok());
  ASSERT_TRUE(cb->CreateRegion("rw", kMiB, Access::kReadWrite).ok());
  ASSERT_TRUE(cb->CreateRegion("private", kMiB, Access::kNone).ok());
  auto buf = ca->Allocate(2 * kMiB);
  ASSERT_TRUE(buf.ok());

  auto w = ca->Write(*buf, 0, Remote(*b, "ro"), 0, 4096);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(w.status().message(), HasSubstr("read-only"));
  EXPECT_THAT(w.status().message(), HasSubstr(b->peer_address()));

  // The next transfer on the same peer still works.
  Fill(buf->data(), 4096, 5);
  ASSERT_TRUE(ca->Write(*buf, 0, Remote(*b, "rw"), 0, 4096).ok());
  ASSERT_TRUE(ca->Read(*buf, 8192, Remote(*b, "ro"), 0, 4096).ok());

  auto oob = ca->Write(*buf, 0, Remote(*b, "rw"), kMiB - 100, 101);
  ASSERT_FALSE(oob.ok());
  EXPECT_EQ(oob.status().code(), absl::StatusCode::kOutOfRange);
  oob = ca->Read(*buf, 0, Remote(*b, "rw"), ~0ull - 10, 100);
  ASSERT_FALSE(oob.ok());
  EXPECT_EQ(oob.status().code(), absl::StatusCode::kOutOfRange);

  auto missing = ca->Write(*buf, 0, Remote(*b, "private"), 0, 10);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);

  // Re-export with less access: the cached descriptor is stale, and the
  // remote side refuses it.
  ASSERT_TRUE(cb->Export("rw", Access::kRead).ok());
  w = ca->Write(*buf, 0, Remote(*b, "rw"), 0, 10);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(cb->Export("rw", Access::kReadWrite).ok());
  EXPECT_TRUE(ca->Write(*buf, 0, Remote(*b, "rw"), 0, 10).ok());
}

TEST_F(TransferTest, OneDaemonWritesToTwo) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  auto c = StartDaemon("c");
  ASSERT_TRUE(a && b && c);
  auto ca = Connect(*a);
  auto cb = Connect(*b);
  auto cc = Connect(*c);
  ASSERT_TRUE(ca && cb && cc);
  ASSERT_TRUE(cb->CreateRegion("r", 16 * kMiB, Access::kReadWrite).ok());
  ASSERT_TRUE(cc->CreateRegion("r", 16 * kMiB, Access::kReadWrite).ok());
  auto buf = ca->Allocate(32 * kMiB);
  ASSERT_TRUE(buf.ok());
  Fill(buf->data(), 16 * kMiB, 1);
  Fill(buf->data() + 16 * kMiB, 16 * kMiB, 2);
  std::thread to_b([&] {
    EXPECT_TRUE(ca->Write(*buf, 0, Remote(*b, "r"), 0, 16 * kMiB).ok());
  });
  std::thread to_c([&] {
    EXPECT_TRUE(
        ca->Write(*buf, 16 * kMiB, Remote(*c, "r"), 0, 16 * kMiB).ok());
  });
  to_b.join();
  to_c.join();
  auto vb = cb->MapRegion("r");
  auto vc = cc->MapRegion("r");
  ASSERT_TRUE(vb.ok() && vc.ok());
  EXPECT_EQ(FirstDifference(buf->data(), vb->data(), 16 * kMiB), -1);
  EXPECT_EQ(FirstDifference(buf->data() + 16 * kMiB, vc->data(), 16 * kMiB),
            -1);
  auto peers = ca->ListPeers();
  ASSERT_TRUE(peers.ok());
  EXPECT_EQ(peers->size(), 2u);
  for (const auto& p : *peers) {
    EXPECT_EQ(p.state, PeerState::kReady) << p.address;
    EXPECT_EQ(p.bytes_written, 16 * kMiB) << p.address;
  }
}

TEST_F(TransferTest, StoppedPeerFailsWithinTheDeadline) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  auto cb = Connect(*b);
  ASSERT_TRUE(cb);
  ASSERT_TRUE(cb->CreateRegion("r", 4 * kMiB, Access::kReadWrite).ok());
  // Set-up with the default deadline (a first handshake can be slow on a
  // busy machine); the transfer under test with a short one.
  auto setup = Connect(*a);
  ASSERT_TRUE(setup);
  auto staged = setup->Allocate(4 * kMiB);
  ASSERT_TRUE(staged.ok());
  ASSERT_TRUE(setup->Write(*staged, 0, Remote(*b, "r"), 0, 4 * kMiB).ok());
  const absl::Duration kTimeout =
      Verbs() ? absl::Seconds(5) : absl::Milliseconds(700);
  auto ca = Connect(*a, kTimeout);
  ASSERT_TRUE(ca);
  auto buf = ca->Allocate(4 * kMiB);
  ASSERT_TRUE(buf.ok());
  // Alive to TCP, but answers nothing.
  ASSERT_TRUE(b->Pause()) << "B did not stop";
  const absl::Time start = absl::Now();
  auto r = ca->Read(*buf, 0, Remote(*b, "r"), 0, 4 * kMiB);
  const absl::Duration took = absl::Now() - start;
  b->Resume();
  if (Verbs()) {
    // One-sided RDMA: B's NIC serves the READ while B's process sleeps.
    EXPECT_TRUE(r.ok()) << r.status();
    return;
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded)
      << r.status();
  // Bounded by its deadline, not hung: generous slack for a busy machine.
  EXPECT_LT(took, kTimeout + absl::Seconds(5));
  // Once it runs again, so do transfers.
  auto again = Connect(*a);
  ASSERT_TRUE(again);
  auto buf2 = again->Allocate(kMiB);
  ASSERT_TRUE(buf2.ok());
  EXPECT_TRUE(again->Read(*buf2, 0, Remote(*b, "r"), 0, kMiB).ok());
}

TEST_F(TransferTest, PeerKilledMidTransferThenRestarted) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  const std::string b_address = b->peer_address();
  constexpr uint64_t kSize = 64 * kMiB;
  ASSERT_NO_FATAL_FAILURE(CreateRegionOn(*b, "r", kSize));
  constexpr absl::Duration kTimeout = absl::Seconds(5);
  auto ca = Connect(*a, kTimeout);
  ASSERT_TRUE(ca);
  auto buf = ca->Allocate(kSize);
  ASSERT_TRUE(buf.ok());
  Fill(buf->data(), kSize, 3);

  // Keep large transfers going, and kill B while they run.
  std::atomic<bool> stop{false};
  std::atomic<bool> load_ended{false};
  std::atomic<int> ok_before{0};
  absl::Status failure;
  absl::Duration failure_took;
  std::thread load([&] {
    while (!stop.load()) {
      const absl::Time start = absl::Now();
      auto w = ca->Write(*buf, 0, Remote(*b, "r"), 0, kSize);
      if (!w.ok()) {
        failure = w.status();
        failure_took = absl::Now() - start;
        break;
      }
      ok_before++;
    }
    load_ended = true;
  });
  // Two transfers must succeed before the kill; if one fails first, stop
  // waiting (the test fails below) rather than spin until ctest's timeout.
  const absl::Time warmup_deadline = absl::Now() + absl::Seconds(60);
  while (ok_before.load() < 2 && !load_ended.load() &&
         absl::Now() < warmup_deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (ok_before.load() < 2) {
    stop = true;
    load.join();
    FAIL() << "transfers to B did not succeed before the kill: " << failure;
  }
  b->Kill();
  absl::SleepFor(absl::Seconds(1));
  stop = true;
  load.join();
  ASSERT_FALSE(failure.ok()) << "no transfer failed after the kill";
  EXPECT_THAT(failure.code(), AnyOf(absl::StatusCode::kUnavailable,
                                    absl::StatusCode::kDeadlineExceeded))
      << failure;
  EXPECT_LE(failure_took, kTimeout + absl::Milliseconds(500));
  if (failure.code() == absl::StatusCode::kUnavailable) {
    EXPECT_THAT(failure.message(), HasSubstr(b_address));
  }

  // While B is down: UNAVAILABLE naming it, fast.
  const absl::Time start = absl::Now();
  auto down = ca->Write(*buf, 0, Remote(*b, "r"), 0, 4096);
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable)
      << down.status();
  EXPECT_THAT(down.status().message(), HasSubstr(b_address));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));

  // B comes back on the same port (a new incarnation, with its region
  // made anew); A was never restarted.
  ASSERT_TRUE(b->Restart().ok()) << b->LogTail();
  ASSERT_EQ(b->peer_address(), b_address);
  ASSERT_NO_FATAL_FAILURE(CreateRegionOn(*b, "r", kSize));
  auto w = ca->Write(*buf, 0, Remote(*b, "r"), 0, kSize);
  ASSERT_TRUE(w.ok()) << w.status() << "\n" << a->LogTail();
  ExpectRegionHolds(*b, "r", buf->data(), kSize);
  auto peers = ca->ListPeers();
  ASSERT_TRUE(peers.ok());
  ASSERT_EQ(peers->size(), 1u);
  EXPECT_EQ((*peers)[0].state, PeerState::kReady);
}

// B restarts while A is idle: no connection fails under a transfer, so A
// learns of the new run only from the first transfer after it, whose
// cached key the new run refuses. That transfer's one retry must find the
// new run (a new Hello) and succeed, for a Write by name as for a batch.
TEST_F(TransferTest, PeerRestartedWhileIdleIsFoundByTheNextTransfer) {
  auto a = StartDaemon("a");
  // On the same data port after the restart: A's old channel reaches the
  // new run, which refuses the old key (on a new port A's connection would
  // be refused, UNAVAILABLE, which already said Hello again).
  auto b = StartDaemonOnAFixedDataPort("b");
  ASSERT_TRUE(a && b);
  ASSERT_NO_FATAL_FAILURE(CreateRegionOn(*b, "r", kMiB));
  auto ca = Connect(*a);
  ASSERT_TRUE(ca);
  auto buf = ca->Allocate(kMiB);
  ASSERT_TRUE(buf.ok());
  Fill(buf->data(), kMiB, 5);
  ASSERT_TRUE(ca->Write(*buf, 0, Remote(*b, "r"), 0, kMiB).ok());

  b->Kill();
  ASSERT_TRUE(b->Restart().ok()) << b->LogTail();
  ASSERT_NO_FATAL_FAILURE(CreateRegionOn(*b, "r", kMiB));
  auto w = ca->Write(*buf, 0, Remote(*b, "r"), 0, kMiB);
  ASSERT_TRUE(w.ok()) << w.status() << "\n" << a->LogTail();
  ExpectRegionHolds(*b, "r", buf->data(), kMiB);
}

}  // namespace
}  // namespace rdmad
