// The cluster directory end to end: a real etcd (Debian etcd-server) on
// loopback and three rdmad daemons using it, driven through the client
// library. Covers export on one daemon and transfer by name from another,
// a move followed by transfers, a SIGKILLed daemon's entries gone within
// its lease TTL + 2 s, etcd stopped and restarted mid-run, and a name race
// that exactly one daemon wins.
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/directory_helpers.h"
#include "tests/integration/etcd_process.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;

// Short, so that a dead daemon vanishes quickly; etcd's minimum is ~2 s.
constexpr int kLeaseTtlSeconds = 3;

class DirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = EtcdMissingReason(); !why.empty()) {
      if (std::getenv("CI") != nullptr) FAIL() << why;
      GTEST_SKIP() << why;
    }
    auto etcd = EtcdProcess::Start(dir_.path());
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
    for (const char* name : {"a", "b", "c"}) {
      DaemonOptions options;
      options.extra_args = {"--directory", etcd_->url(),
                            "--directory_lease_ttl",
                            absl::StrCat(kLeaseTtlSeconds)};
      auto daemon = DaemonProcess::Start(dir_.path(), name, options);
      ASSERT_TRUE(daemon.ok()) << daemon.status();
      daemons_.push_back(*std::move(daemon));
    }
    for (auto& d : daemons_) {
      ASSERT_TRUE(WaitDirectoryConnected(*d)) << d->LogTail();
    }
  }

  DaemonProcess& a() { return *daemons_[0]; }
  DaemonProcess& b() { return *daemons_[1]; }
  DaemonProcess& c() { return *daemons_[2]; }

  // Whether `name` leaves `daemon`'s listing within `timeout`.
  bool GoneWithin(const DaemonProcess& daemon, const std::string& name,
                  absl::Duration timeout) {
    const absl::Time limit = absl::Now() + timeout;
    for (;;) {
      if (!Listed(daemon, name).has_value()) return true;
      if (absl::Now() >= limit) return false;
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  TempDir dir_;
  std::unique_ptr<EtcdProcess> etcd_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
};

TEST_F(DirectoryTest, ExportOnOneTransferByNameFromAnother) {
  auto ca = Connect(a());
  ASSERT_NE(ca, nullptr);
  ASSERT_TRUE(ca->CreateRegion("kv/shard-7", 4096, Access::kReadWrite).ok());

  // Listed everywhere, with its holder and generation.
  auto listed = Listed(c(), "kv/shard-7");
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->node, a().peer_address());
  EXPECT_EQ(listed->size, 4096u);
  EXPECT_EQ(listed->access, Access::kReadWrite);
  EXPECT_NE(listed->incarnation, 0u);
  EXPECT_GT(listed->revision, 0);

  // b writes by name, c reads by name: both land on a.
  ASSERT_TRUE(WriteByName(b(), "kv/shard-7", "hello").ok());
  EXPECT_EQ(ReadLocal(a(), "kv/shard-7", 5), "hello");
  auto cc = Connect(c());
  ASSERT_NE(cc, nullptr);
  auto buffer = cc->Allocate(5);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  auto read = cc->Read(*buffer, 0, ByName("kv/shard-7"), 0, 5);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(std::string(buffer->data(), 5), "hello");

  // A name no one exports: NOT_FOUND naming the directory.
  auto missing = cc->Read(*buffer, 0, ByName("kv/nowhere"), 0, 5);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("etcd://"));

  // Unexport: transfers by name fail at once (the holder refuses them),
  // and the entry goes (withdrawn just after the call, not within it).
  ASSERT_TRUE(ca->Export("kv/shard-7", Access::kNone).ok());
  EXPECT_EQ(WriteByName(b(), "kv/shard-7", "x").code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(GoneWithin(c(), "kv/shard-7", absl::Seconds(10)));
}

TEST_F(DirectoryTest, TransfersFollowARegionThatMoves) {
  auto ca = Connect(a());
  auto cb = Connect(b());
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(cb, nullptr);
  ASSERT_TRUE(ca->CreateRegion("moving", 4096, Access::kReadWrite).ok());
  ASSERT_TRUE(WriteByName(c(), "moving", "one").ok());  // c caches a's entry
  EXPECT_EQ(ReadLocal(a(), "moving", 3), "one");
  const auto before = Listed(c(), "moving");
  ASSERT_TRUE(before.has_value());

  // Free on a, export on b: c's next transfer goes to b, whether its cache
  // has caught up yet or the stale entry is fenced and re-resolved.
  ASSERT_TRUE(ca->FreeRegion("moving").ok());
  ASSERT_TRUE(cb->CreateRegion("moving", 4096, Access::kReadWrite).ok());
  ASSERT_TRUE(WriteByName(c(), "moving", "two").ok());
  EXPECT_EQ(ReadLocal(b(), "moving", 3), "two");
  const auto after = Listed(c(), "moving");
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->node, b().peer_address());
  EXPECT_NE(after->incarnation, before->incarnation);
  EXPECT_GT(after->revision, before->revision);

  // Recreated on the same daemon: a new region behind the same name is a
  // new generation, and transfers reach the new one.
  ASSERT_TRUE(cb->FreeRegion("moving").ok());
  ASSERT_TRUE(cb->CreateRegion("moving", 8192, Access::kReadWrite).ok());
  ASSERT_TRUE(WriteByName(c(), "moving", "three").ok());
  EXPECT_EQ(ReadLocal(b(), "moving", 5), "three");
}

TEST_F(DirectoryTest, KilledDaemonDisappearsWithinTheLeaseTtl) {
  auto cb = Connect(b());
  ASSERT_NE(cb, nullptr);
  ASSERT_TRUE(cb->CreateRegion("doomed", 4096, Access::kRead).ok());
  ASSERT_TRUE(Listed(c(), "doomed").has_value());
  cb.reset();
  b().Kill();
  const absl::Time killed = absl::Now();
  // etcd expires the lease at most TTL after the last keep-alive.
  const absl::Time limit = killed + absl::Seconds(kLeaseTtlSeconds + 2);
  bool gone = false;
  while (!gone && absl::Now() < limit + absl::Seconds(1)) {
    gone = !Listed(c(), "doomed").has_value();
    if (!gone) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(gone) << "still listed " << absl::Now() - killed
                    << " after SIGKILL";
  EXPECT_LE(absl::Now(), limit + absl::Milliseconds(200))
      << "gone only after " << absl::Now() - killed;
  // And the name is free for another daemon.
  auto ca = Connect(a());
  ASSERT_NE(ca, nullptr);
  EXPECT_TRUE(ca->CreateRegion("doomed", 4096, Access::kRead).ok());
}

TEST_F(DirectoryTest, EtcdStoppedAndRestartedMidRun) {
  auto ca = Connect(a());
  ASSERT_NE(ca, nullptr);
  ASSERT_TRUE(ca->CreateRegion("kept", 4096, Access::kReadWrite).ok());
  ASSERT_TRUE(WriteByName(c(), "kept", "warm").ok());  // in c's cache now

  etcd_->Kill();
  // Cached entries keep working: the data path never waits for etcd.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(WriteByName(c(), "kept", absl::StrCat("down", i)).ok());
  }
  EXPECT_EQ(ReadLocal(a(), "kept", 5), "down2");
  // New look-ups fail UNAVAILABLE naming the store.
  auto cc = Connect(c());
  ASSERT_NE(cc, nullptr);
  auto lookup = cc->LookupRegion("never-seen");
  EXPECT_EQ(lookup.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(lookup.status().message()),
              HasSubstr(etcd_->url()));
  // A new name cannot be checked for uniqueness: the export is refused
  // and leaves nothing behind.
  auto made = ca->CreateRegion("while-down", 4096, Access::kReadWrite);
  EXPECT_EQ(made.status().code(), absl::StatusCode::kUnavailable);
  auto regions = ca->ListRegions();
  ASSERT_TRUE(regions.ok());
  for (const auto& r : *regions) EXPECT_NE(r.name, "while-down");

  ASSERT_TRUE(etcd_->Restart().ok());
  for (auto& d : daemons_) {
    ASSERT_TRUE(WaitDirectoryConnected(*d)) << d->LogTail();
  }
  // Re-published under a new lease: listed again, still on a.
  auto listed = Listed(c(), "kept");
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->node, a().peer_address());
  auto status = ca->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_GE(status->directory->reconnects, 1u);
  EXPECT_EQ(status->directory->published_regions, 1u);
  ASSERT_TRUE(WriteByName(b(), "kept", "again").ok());
  EXPECT_EQ(ReadLocal(a(), "kept", 5), "again");
}

TEST_F(DirectoryTest, NameRaceHasExactlyOneWinner) {
  for (int round = 0; round < 5; ++round) {
    const std::string name = absl::StrCat("race-", round);
    absl::Status results[2];
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([&, i] {
        auto client = Connect(i == 0 ? a() : b());
        if (client == nullptr) return;
        results[i] =
            client->CreateRegion(name, 4096, Access::kReadWrite).status();
      });
    }
    for (auto& t : threads) t.join();
    const int wins = results[0].ok() + results[1].ok();
    ASSERT_EQ(wins, 1) << results[0] << " / " << results[1];
    const int loser = results[0].ok() ? 1 : 0;
    EXPECT_EQ(results[loser].code(), absl::StatusCode::kAlreadyExists)
        << results[loser];
    // The loser keeps no region of that name; the directory names the winner.
    auto client = Connect(loser == 0 ? a() : b());
    ASSERT_NE(client, nullptr);
    auto regions = client->ListRegions();
    ASSERT_TRUE(regions.ok());
    for (const auto& r : *regions) EXPECT_NE(r.name, name);
    auto listed = Listed(c(), name);
    ASSERT_TRUE(listed.has_value());
    EXPECT_EQ(listed->node, (loser == 0 ? b() : a()).peer_address());
  }
}

TEST_F(DirectoryTest, ShutdownRemovesEntriesAtOnce) {
  auto cb = Connect(b());
  ASSERT_NE(cb, nullptr);
  ASSERT_TRUE(cb->CreateRegion("leaving", 4096, Access::kRead).ok());
  cb.reset();
  ASSERT_TRUE(b().Stop().ok());
  // Revoked on the way out, not left to expire.
  EXPECT_FALSE(Listed(c(), "leaving").has_value());
}

}  // namespace
}  // namespace rdmad::testing
