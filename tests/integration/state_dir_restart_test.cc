// Named regions survive a restart of rdmad in state-directory mode
// (--state_dir, docs/RESTART.md), with real daemons on loopback:
//
//   - killed with SIGKILL and stopped with SIGTERM, a daemon comes back
//     with its named regions: same names, owner, mode and export, bytes
//     intact; session buffers are gone (they end with their sessions);
//   - a peer that addresses a region by name keeps transferring after at
//     most one retry; a descriptor from before the restart is refused;
//   - 50 restarts (SIGTERM and SIGKILL in turn) leak nothing: the state
//     directory holds the same files and bytes, the restarted daemon the
//     same descriptors, the peer that stays up no more descriptors or
//     memory than after the first;
//   - a damaged record and a truncated memory file are skipped, with a
//     message, and put aside; the other regions are adopted;
//   - a client that truncates a region's file (it holds its descriptor)
//     gets errors, never a dead daemon; one that grows it (ftruncate,
//     writes past the end) sees it cut back to the region at once, and at
//     the next start if no daemon ran; a memfd region's descriptor cannot
//     change its size at all;
//   - keep_regions_on_restart: false and rdmactl free give the old
//     behaviour; two daemons cannot share one state directory.
#include <fcntl.h>
#include <linux/falloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/raw_session.h"
#include "tests/integration/restart_helpers.h"

namespace rdmad {
namespace {

using ::rdmad::testing::Connect;
using ::rdmad::testing::DaemonOptions;
using ::rdmad::testing::DaemonProcess;
using ::rdmad::testing::FillPattern;
using ::rdmad::testing::PatternMismatch;
using ::rdmad::testing::Remote;
using ::rdmad::testing::StartDaemonOrNull;
using ::rdmad::testing::StateDirBase;
using ::rdmad::testing::TempDir;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

class StateDirRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    // Stock RLIMIT_MEMLOCK may be 8 MiB; the budget is set explicitly.
    WriteConfig("");
  }

  void WriteConfig(const std::string& extra) {
    std::ofstream(config_) << "max_pinned_bytes: 1073741824\n" << extra;
  }

  std::unique_ptr<DaemonProcess> StartKeeping(const std::string& name) {
    DaemonOptions options;
    options.extra_args = {"--state_dir", state_.state_dir(), "--config",
                          config_};
    return StartDaemonOrNull(tmp_, name, std::move(options));
  }
  std::unique_ptr<DaemonProcess> StartPlain(const std::string& name) {
    return StartDaemonOrNull(tmp_, name);
  }

  // Creates region `name` (1 MiB, exported read-write, mode 0666) through
  // `client` and returns the descriptor any client that may write it gets
  // for it: what such a client can do to the memory itself.
  static absl::StatusOr<UniqueFd> WritableRegion(Client& client,
                                                 const DaemonProcess& daemon,
                                                 const std::string& name) {
    auto made =
        client.CreateRegion(name, kMiB, Access::kReadWrite, {.mode = 0666});
    if (!made.ok()) return made.status();
    auto raw = testing::RawSession::Open(daemon.socket());
    if (!raw.ok()) return raw.status();
    return (*raw)->TakeFd(made->id);
  }

  // Restarts `daemon` after SIGKILL or SIGTERM, on the same ports.
  static void Restart(DaemonProcess& daemon, int sig) {
    if (sig == SIGKILL) daemon.Kill();
    ASSERT_TRUE(daemon.Restart().ok()) << daemon.LogTail();
  }

  // A write by name from `client` (on a peer) to `target`'s region `name`,
  // tried at most twice. Returns the attempts it took (3 = failed twice).
  static int WriteByName(Client& client, const Buffer& buffer,
                         const DaemonProcess& target, const std::string& name,
                         uint64_t offset, uint64_t length) {
    for (int attempt = 1; attempt <= 2; ++attempt) {
      auto done = client.Write(buffer, 0, Remote(target, name), offset, length);
      if (done.ok()) return attempt;
      std::cerr << "attempt " << attempt << ": " << done.status() << "\n";
    }
    return 3;
  }

  TempDir tmp_;
  StateDirBase state_{tmp_.path()};
  const std::string config_ = tmp_.path() + "/rdmad.conf";
};

TEST_F(StateDirRestartTest, SigkillAndSigtermKeepBytesAndPeersCarryOn) {
  auto a = StartKeeping("a");
  auto b = StartPlain("b");
  ASSERT_TRUE(a && b);
  constexpr uint64_t kCache = 2 * kMiB;
  constexpr uint64_t kPrivate = 100 * kKiB;  // not a multiple of a page
  {
    auto ca = Connect(*a);
    ASSERT_TRUE(ca);
    ASSERT_TRUE(
        ca->CreateRegion("cache", kCache, Access::kReadWrite, {.mode = 0640})
            .ok());
    ASSERT_TRUE(ca->CreateRegion("private", kPrivate, Access::kNone).ok());
    auto cache = ca->MapRegion("cache");
    auto priv = ca->MapRegion("private");
    ASSERT_TRUE(cache.ok() && priv.ok());
    FillPattern(cache->data(), kCache, 1);
    FillPattern(priv->data(), kPrivate, 2);
    // A session buffer: it must not survive.
    ASSERT_TRUE(ca->Allocate(4096).ok());
  }
  auto cb = Connect(*b);
  ASSERT_TRUE(cb);
  auto buf = cb->Allocate(kMiB);
  ASSERT_TRUE(buf.ok());
  // The peer resolves the name once and caches it.
  FillPattern(buf->data(), kMiB, 3);
  ASSERT_EQ(WriteByName(*cb, *buf, *a, "cache", 0, kMiB), 1);
  std::string old_descriptor;
  {
    auto ca = Connect(*a);
    auto d = ca->GetDescriptor("cache");
    ASSERT_TRUE(d.ok()) << d.status();
    old_descriptor = *d;
  }

  uint64_t seed = 10;
  for (const int sig : {SIGKILL, SIGTERM}) {
    SCOPED_TRACE(sig == SIGKILL ? "SIGKILL" : "SIGTERM");
    const pid_t before = a->pid();
    Restart(*a, sig);
    ASSERT_NE(a->pid(), before);
    auto ca = Connect(*a);
    ASSERT_TRUE(ca);

    // The named regions, as they were; no session buffer.
    auto listed = ca->ListRegions();
    ASSERT_TRUE(listed.ok());
    ASSERT_EQ(listed->size(), 2u);
    for (const RegionInfo& r : *listed) {
      if (r.name == "cache") {
        EXPECT_EQ(r.size, kCache);
        EXPECT_EQ(r.mode, 0640u);
        EXPECT_EQ(r.export_access, Access::kReadWrite);
      } else {
        EXPECT_EQ(r.name, "private");
        EXPECT_EQ(r.size, kPrivate);
        EXPECT_EQ(r.export_access, Access::kNone);
      }
      EXPECT_EQ(r.owner_uid, ::getuid());
    }
    auto cache = ca->MapRegion("cache");
    auto priv = ca->MapRegion("private");
    ASSERT_TRUE(cache.ok() && priv.ok());
    // What the peer wrote last, then the original pattern after it.
    EXPECT_EQ(PatternMismatch(cache->data(), kMiB, seed == 10 ? 3 : seed - 1),
              -1);
    for (uint64_t i = kMiB; i < kCache; ++i) {
      ASSERT_EQ(cache->data()[i], testing::PatternByte(1, i)) << "byte " << i;
    }
    EXPECT_EQ(PatternMismatch(priv->data(), kPrivate, 2), -1);

    // The peer, still running, addresses the region by name: at most one
    // retry (the peer layer usually absorbs the restart itself).
    FillPattern(buf->data(), kMiB, seed);
    const int attempts = WriteByName(*cb, *buf, *a, "cache", 0, kMiB);
    EXPECT_LE(attempts, 2) << "the peer did not carry on after one retry";
    RecordProperty(
        sig == SIGKILL ? "attempts_after_sigkill" : "attempts_after_sigterm",
        attempts);
    EXPECT_EQ(PatternMismatch(cache->data(), kMiB, seed), -1);
    std::memset(buf->data(), 0, kMiB);
    ASSERT_TRUE(cb->Read(*buf, 0, Remote(*a, "cache"), 0, kMiB).ok());
    EXPECT_EQ(PatternMismatch(buf->data(), kMiB, seed), -1);

    // The earlier run's descriptor is refused; a new one works.
    RemoteRegion old_key;
    old_key.descriptor = old_descriptor;
    auto refused = cb->Write(*buf, 0, old_key, 0, 4096);
    ASSERT_FALSE(refused.ok()) << "a descriptor of the earlier run worked";
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kNotFound)
        << refused.status();
    EXPECT_THAT(refused.status().message(), HasSubstr("earlier run"));
    auto fresh = ca->GetDescriptor("cache");
    ASSERT_TRUE(fresh.ok());
    EXPECT_NE(*fresh, old_descriptor);
    RemoteRegion new_key;
    new_key.descriptor = *fresh;
    EXPECT_TRUE(cb->Read(*buf, 0, new_key, 0, 4096).ok());
    old_descriptor = *fresh;
    ++seed;
  }
  const std::string log = a->LogTail();
  EXPECT_THAT(log, HasSubstr("adopted 2 kept region(s) (2199552 bytes"));
  (void)a->Stop();
  EXPECT_THAT(a->LogTail(), HasSubstr("kept 2 named region(s) (2199552 bytes"));
}

TEST_F(StateDirRestartTest, FiftyRestartsLeakNothing) {
  auto a = StartKeeping("a");
  auto b = StartPlain("b");
  ASSERT_TRUE(a && b);
  {
    auto ca = Connect(*a);
    ASSERT_TRUE(ca);
    ASSERT_TRUE(ca->CreateRegion("cache", kMiB, Access::kReadWrite).ok());
    for (const char* name : {"r1", "r2", "r3"}) {
      ASSERT_TRUE(ca->CreateRegion(name, 64 * kKiB, Access::kRead).ok());
    }
  }
  auto cb = Connect(*b);
  ASSERT_TRUE(cb);
  auto buf = cb->Allocate(64 * kKiB);
  ASSERT_TRUE(buf.ok());

  constexpr int kCycles = 50;
  testing::DirUsage first_dir;
  int first_a_fds = 0;
  int first_b_fds = 0;
  uint64_t first_b_rss = 0;
  int most_attempts = 0;
  for (int cycle = 1; cycle <= kCycles; ++cycle) {
    SCOPED_TRACE(absl::StrCat("cycle ", cycle));
    Restart(*a, cycle % 2 == 0 ? SIGKILL : SIGTERM);
    FillPattern(buf->data(), 64 * kKiB, 100 + cycle);
    const int attempts =
        WriteByName(*cb, *buf, *a, "cache", cycle * 4096, 64 * kKiB);
    ASSERT_LE(attempts, 2);
    most_attempts = std::max(most_attempts, attempts);
    // What the previous cycle wrote is still there (read back by name).
    if (cycle > 1) {
      auto back = cb->Allocate(64 * kKiB);
      ASSERT_TRUE(back.ok());
      ASSERT_TRUE(
          cb->Read(*back, 0, Remote(*a, "cache"), (cycle - 1) * 4096, 4096)
              .ok());
      ASSERT_EQ(PatternMismatch(back->data(), 4096, 100 + cycle - 1), -1);
    }
    const testing::DirUsage dir = testing::UsageOf(state_.state_dir());
    const int a_fds = testing::FdCount(a->pid());
    const int b_fds = testing::FdCount(b->pid());
    if (cycle == 1) {
      first_dir = dir;
      first_a_fds = a_fds;
      first_b_fds = b_fds;
      first_b_rss = testing::ResidentBytes(b->pid());
      EXPECT_EQ(dir.files, 8);  // a memory file and a record per region
      continue;
    }
    ASSERT_EQ(dir.files, first_dir.files) << "files pile up in the state dir";
    ASSERT_EQ(dir.bytes, first_dir.bytes) << "state dir memory grows";
    // A fresh process each time: its descriptors do not depend on how many
    // restarts came before (a little slack for gRPC's own).
    ASSERT_LE(a_fds, first_a_fds + 4) << "the restarted daemon holds more";
    // The peer that stays up rebuilds its channel each time; old ones are
    // closed (slack: one being retired).
    ASSERT_LE(b_fds, first_b_fds + 6) << "the peer leaks channels";
  }
  const uint64_t b_rss = testing::ResidentBytes(b->pid());
  std::cout << "after " << kCycles << " restarts: state dir " << first_dir.files
            << " files / " << first_dir.bytes
            << " bytes throughout; daemon fds " << first_a_fds << "; peer fds "
            << first_b_fds << " -> " << testing::FdCount(b->pid())
            << ", peer RSS " << first_b_rss << " -> " << b_rss
            << "; most attempts per transfer " << most_attempts << "\n";
  if (!testing::SanitizerBuild()) {
    EXPECT_LT(b_rss, first_b_rss + 48 * kMiB) << "the peer's memory grows";
  }
}

TEST_F(StateDirRestartTest, DamagedRecordAndTruncatedMemoryAreSkipped) {
  auto a = StartKeeping("a");
  ASSERT_TRUE(a);
  {
    auto ca = Connect(*a);
    ASSERT_TRUE(ca);
    for (const char* name : {"good", "broken", "cut"}) {
      ASSERT_TRUE(ca->CreateRegion(name, kMiB, Access::kRead).ok());
      auto view = ca->MapRegion(name);
      ASSERT_TRUE(view.ok());
      FillPattern(view->data(), kMiB, name[0]);
    }
  }
  (void)a->Stop();
  const std::string dir = state_.state_dir();
  const std::string broken = testing::SlotOf(dir, "broken");
  const std::string cut = testing::SlotOf(dir, "cut");
  ASSERT_FALSE(broken.empty() || cut.empty());
  std::string record = testing::ReadAll(dir + "/" + broken + ".rec");
  record[record.find("size ") + 5] ^= 1;
  std::ofstream(dir + "/" + broken + ".rec") << record;
  ASSERT_EQ(::truncate((dir + "/" + cut + ".mem").c_str(), 64 * kKiB), 0);

  ASSERT_TRUE(a->Restart().ok()) << a->LogTail();
  auto ca = Connect(*a);
  ASSERT_TRUE(ca);
  auto listed = ca->ListRegions();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "good");
  auto good = ca->MapRegion("good");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(PatternMismatch(good->data(), kMiB, 'g'), -1);

  const std::string log = a->LogTail();
  EXPECT_THAT(log, HasSubstr(absl::StrCat("kept slot ", broken)));
  EXPECT_THAT(log, HasSubstr("damaged record: checksum"));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("kept region 'cut' (slot ", cut,
                                          ") (1Mi) not adopted")));
  EXPECT_THAT(log, HasSubstr("truncated"));
  EXPECT_THAT(log, HasSubstr("moved to " + dir + "/damaged/"));
  EXPECT_THAT(log, HasSubstr("adopted 1 kept region(s)"));
  EXPECT_THAT(log, HasSubstr("skipped 2"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/damaged/" + cut + ".why"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/damaged/" + broken + ".rec"));
  // The names are free again.
  EXPECT_TRUE(ca->CreateRegion("cut", kMiB, Access::kNone).ok());
  EXPECT_TRUE(ca->CreateRegion("broken", kMiB, Access::kNone).ok());
}

TEST_F(StateDirRestartTest, AClientTruncatingARegionGetsErrorsNotADeadDaemon) {
  auto a = StartKeeping("a");
  auto b = StartPlain("b");
  ASSERT_TRUE(a && b);
  auto ca = Connect(*a);
  ASSERT_TRUE(ca);
  // Any client that may map the region gets its descriptor: a state-dir
  // file cannot be sealed, so it can shrink it under the daemon.
  auto fd = WritableRegion(*ca, *a, "victim");
  ASSERT_TRUE(fd.ok()) << fd.status();
  ASSERT_EQ(::ftruncate(fd->get(), 4096), 0);

  auto local = ca->Allocate(kMiB);
  ASSERT_TRUE(local.ok());
  RemoteRegion here;
  here.name = "victim";  // no peer: a copy inside this daemon
  auto copied = ca->Write(*local, 0, here, 512 * kKiB, 64 * kKiB);
  EXPECT_EQ(copied.status().code(), absl::StatusCode::kDataLoss)
      << copied.status();
  auto read = ca->Read(*local, 0, here, 0, kMiB);
  EXPECT_FALSE(read.ok());
  // A peer writing into the vanished pages over TCP.
  auto cb = Connect(*b, absl::Seconds(10));
  auto buf = cb->Allocate(64 * kKiB);
  ASSERT_TRUE(buf.ok());
  EXPECT_FALSE(
      cb->Write(*buf, 0, Remote(*a, "victim"), 512 * kKiB, 64 * kKiB).ok());
  // Still the same daemon, still serving.
  auto status = ca->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status() << "\n" << a->LogTail();
  EXPECT_EQ(status->pid, static_cast<uint32_t>(a->pid()));
  EXPECT_TRUE(cb->Write(*buf, 0, Remote(*a, "victim"), 0, 4096).ok());

  // The next start finds the file truncated and does not adopt it.
  local = absl::InternalError("released");
  ca.reset();
  ASSERT_TRUE(a->Restart().ok());
  EXPECT_THAT(a->LogTail(), HasSubstr("kept region 'victim'"));
  auto again = Connect(*a);
  auto listed = again->ListRegions();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 0u);
}

// What a file holds: its size and the memory allocated to it.
std::pair<uint64_t, uint64_t> Held(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return {0, 0};
  return {static_cast<uint64_t>(st.st_size),
          static_cast<uint64_t>(st.st_blocks) * 512};
}

// A client with write access holds the state file itself (a tmpfs file
// cannot be sealed, and a writable shared mapping needs a writable
// descriptor). Through it: ftruncate to 1 GiB and a 64 MiB write, under a
// 32 MiB quota. The daemon cuts the file back to its region at once, and a
// restart cuts back what grew while no daemon ran; the region's own bytes
// stay, and nobody holds more than the region.
TEST_F(StateDirRestartTest, AClientCannotGrowAKeptRegionPastItsSize) {
  WriteConfig("quota_pinned_bytes_per_uid: 33554432\n");
  auto a = StartKeeping("a");
  ASSERT_TRUE(a);
  auto ca = Connect(*a);
  ASSERT_TRUE(ca);
  auto fd = WritableRegion(*ca, *a, "victim");
  ASSERT_TRUE(fd.ok()) << fd.status();
  {
    auto view = ca->MapRegion("victim");
    ASSERT_TRUE(view.ok()) << view.status();
    FillPattern(view->data(), kMiB, 5);
  }
  const std::vector<char> chunk(kMiB, 'x');
  auto grow = [&] {
    (void)::ftruncate(fd->get(), static_cast<off_t>(1024 * kMiB));
    for (uint64_t i = 0; i < 64; ++i) {
      (void)::pwrite(fd->get(), chunk.data(), chunk.size(),
                     static_cast<off_t>((512 + i) * kMiB));
    }
  };

  // While the daemon runs: cut back at once.
  grow();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (Held(fd->get()) != std::make_pair(kMiB, kMiB) &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(Held(fd->get()), std::make_pair(kMiB, kMiB))
      << "size and allocated bytes of the region's file";
  EXPECT_LE(testing::UsageOf(state_.state_dir()).bytes, kMiB + 4 * kKiB);
  EXPECT_THAT(a->Log(), HasSubstr("through a descriptor a client holds; cut "
                                  "back to the region's 1 MiB"));
  auto status = ca->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->pinned_bytes, kMiB);

  // While no daemon runs, nothing cuts it back: the next start does,
  // before it adopts the region.
  ca.reset();
  a->Kill();
  grow();
  EXPECT_GE(Held(fd->get()).second, 64 * kMiB) << "the growth took place";
  ASSERT_TRUE(a->Restart().ok()) << a->LogTail();
  EXPECT_THAT(a->Log(), HasSubstr("had grown to 1 GiB holding 65 MiB of "
                                  "memory; cut back to the region's 1 MiB"));
  EXPECT_EQ(Held(fd->get()), std::make_pair(kMiB, kMiB));
  EXPECT_LE(testing::UsageOf(state_.state_dir()).bytes, kMiB + 4 * kKiB);
  ca = Connect(*a);
  ASSERT_TRUE(ca);
  auto listed = ca->ListRegions();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].size, kMiB);
  auto view = ca->MapRegion("victim");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(PatternMismatch(view->data(), kMiB, 5), -1);

  // Freed: the file is cut back before it goes, whoever still holds it.
  view = absl::InternalError("unmapped");
  ASSERT_TRUE(ca->FreeRegion("victim").ok());
  EXPECT_EQ(Held(fd->get()), std::make_pair(kMiB, kMiB));
  EXPECT_EQ(testing::UsageOf(state_.state_dir()).files, 0);
}

// A region kept in a memfd (no state_dir: the fd store, or nowhere) is
// sealed: the descriptor a writer gets cannot change its size at all.
TEST_F(StateDirRestartTest, AMemfdRegionsDescriptorCannotChangeItsSize) {
  auto a = StartPlain("a");
  ASSERT_TRUE(a);
  auto ca = Connect(*a);
  ASSERT_TRUE(ca);
  auto fd = WritableRegion(*ca, *a, "sealed");
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_EQ(::ftruncate(fd->get(), static_cast<off_t>(1024 * kMiB)), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::ftruncate(fd->get(), 4096), -1);
  EXPECT_EQ(errno, EPERM);
  const char byte = 'x';
  EXPECT_EQ(::pwrite(fd->get(), &byte, 1, static_cast<off_t>(2 * kMiB)), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::fallocate(fd->get(), FALLOC_FL_KEEP_SIZE,
                        static_cast<off_t>(kMiB), static_cast<off_t>(kMiB)),
            0);
  EXPECT_EQ(Held(fd->get()).first, kMiB);
  EXPECT_LE(Held(fd->get()).second, kMiB);
}

TEST_F(StateDirRestartTest, FreeAndKeepRegionsOnRestartFalseEndRegions) {
  auto a = StartKeeping("a");
  ASSERT_TRUE(a);
  {
    auto ca = Connect(*a);
    ASSERT_TRUE(ca->CreateRegion("stays", 64 * kKiB, Access::kNone).ok());
    ASSERT_TRUE(ca->CreateRegion("freed", 64 * kKiB, Access::kNone).ok());
  }
  auto freed = testing::RunProcess(
      {testing::RdmactlBinary(), "--socket", a->socket(), "free", "freed"});
  ASSERT_EQ(freed.exit_code, 0) << freed.err;
  EXPECT_EQ(testing::UsageOf(state_.state_dir()).files, 2);
  ASSERT_TRUE(a->Restart().ok());
  {
    auto ca = Connect(*a);
    auto listed = ca->ListRegions();
    ASSERT_TRUE(listed.ok());
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ((*listed)[0].name, "stays");
  }

  // Today's behaviour: nothing kept, and what was kept is let go.
  WriteConfig("keep_regions_on_restart: false\n");
  ASSERT_TRUE(a->Restart().ok());
  EXPECT_THAT(a->LogTail(),
              HasSubstr("keep_regions_on_restart is false: named regions end "
                        "with this daemon; discarded 1 region(s)"));
  EXPECT_EQ(testing::UsageOf(state_.state_dir()).files, 0);
  {
    auto ca = Connect(*a);
    auto listed = ca->ListRegions();
    ASSERT_TRUE(listed.ok());
    EXPECT_EQ(listed->size(), 0u);
    ASSERT_TRUE(ca->CreateRegion("fleeting", 64 * kKiB, Access::kNone).ok());
    auto info = ca->ListRegions();
    ASSERT_TRUE(info.ok());
    EXPECT_EQ((*info)[0].backing, "memfd");
  }
  EXPECT_EQ(testing::UsageOf(state_.state_dir()).files, 0);
  (void)a->Stop();
  EXPECT_THAT(a->LogTail(), HasSubstr("released 1 daemon-owned region(s)"));
}

TEST_F(StateDirRestartTest, TwoDaemonsCannotShareAStateDirectory) {
  auto a = StartKeeping("a");
  ASSERT_TRUE(a);
  DaemonOptions options;
  options.extra_args = {"--state_dir", state_.state_dir(), "--config", config_};
  auto second = DaemonProcess::Start(tmp_.path(), "second", options);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("is in use by another running rdmad"));
}

TEST_F(StateDirRestartTest, RefusesAStateDirectoryOthersCanWrite) {
  const std::string dir = state_.path() + "/open";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  DaemonOptions options;
  options.extra_args = {"--state_dir", dir, "--config", config_};
  auto daemon = DaemonProcess::Start(tmp_.path(), "open", options);
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(std::string(daemon.status().message()), HasSubstr("chmod 700"));
}

}  // namespace
}  // namespace rdmad
