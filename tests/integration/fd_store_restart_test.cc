// Named regions survive a restart of rdmad under systemd, through the
// service manager's file descriptor store, with a stand-in for the service
// manager (service_manager_stand_in.h) and real daemons on loopback:
//
//   - each named region is in the store as a memfd and a record; an export
//     change replaces the record, a free removes both;
//   - stopped with SIGTERM or killed with SIGKILL and started again with the
//     stored descriptors (LISTEN_FDS), the daemon has its regions back with
//     their bytes; a peer addressing one by name carries on after at most
//     one retry; a descriptor of the earlier run is refused;
//   - a damaged record is skipped with a message and dropped from the
//     store; keep_regions_on_restart: false empties it;
//   - restarts do not make the store or the daemon's descriptors grow.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/restart_helpers.h"
#include "tests/integration/service_manager_stand_in.h"

namespace rdmad {
namespace {

using ::rdmad::testing::ChildProcess;
using ::rdmad::testing::DaemonProcess;
using ::rdmad::testing::FillPattern;
using ::rdmad::testing::PatternMismatch;
using ::rdmad::testing::Remote;
using ::rdmad::testing::ServiceManagerStandIn;
using ::rdmad::testing::TempDir;
using ::testing::Each;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

// Names in the store that start with `prefix`.
int Count(const std::vector<std::string>& names, const std::string& prefix) {
  int n = 0;
  for (const std::string& name : names) n += absl::StartsWith(name, prefix);
  return n;
}

class FdStoreRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(tmp_.path().empty());
    auto manager = ServiceManagerStandIn::Start(tmp_.path());
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
    WriteConfig("");
  }
  void TearDown() override {
    if (daemon_ != nullptr) {
      daemon_->Signal(SIGTERM);
      (void)daemon_->Wait(absl::Seconds(20));
    }
  }

  void WriteConfig(const std::string& extra) {
    std::ofstream(config_) << "max_pinned_bytes: 1073741824\n" << extra;
  }

  // Starts the daemon under the stand-in (the first time on a free port
  // outside the ephemeral range, then on the same one) and waits for
  // READY=1.
  void Launch() {
    daemon_ = nullptr;
    auto child = manager_->Launch(
        {testing::RdmadBinary(), "--socket", socket_, "--peer_listen",
         peer_.empty() ? absl::StrCat("127.0.0.1:", testing::FreeLoopbackPort())
                       : peer_,
         "--transport", "tcp",
         "--config", config_, "--log_level", "debug"},
        log_);
    ASSERT_TRUE(child.ok()) << child.status();
    daemon_ = *std::move(child);
    ASSERT_TRUE(manager_->WaitReady(absl::Seconds(60))) << "no READY=1\n"
                                                        << Log();
    auto client = Connect(socket_);
    ASSERT_TRUE(client);
    auto status = client->GetStatus();
    ASSERT_TRUE(status.ok());
    ASSERT_EQ(status->pid, static_cast<uint32_t>(daemon_->pid()));
    peer_ = status->peer_address;
  }
  void Stop(int sig) {
    daemon_->Signal(sig);
    auto exited = daemon_->Wait(absl::Seconds(30));
    ASSERT_TRUE(exited.ok()) << Log();
    if (sig == SIGTERM) {
      EXPECT_TRUE(WIFEXITED(*exited) && WEXITSTATUS(*exited) == 0) << Log();
    }
    daemon_ = nullptr;
  }
  static std::unique_ptr<Client> Connect(const std::string& socket) {
    auto client =
        Client::Connect({.socket_path = socket, .timeout = absl::Seconds(30)});
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }
  RemoteRegion Named(const std::string& name) const {
    RemoteRegion r;
    r.peer = peer_;
    r.name = name;
    return r;
  }
  std::string Log() const { return testing::ReadAll(log_); }

  TempDir tmp_;
  std::unique_ptr<ServiceManagerStandIn> manager_;
  std::unique_ptr<ChildProcess> daemon_;
  const std::string socket_ = tmp_.path() + "/a.sock";
  const std::string config_ = tmp_.path() + "/rdmad.conf";
  const std::string log_ = tmp_.path() + "/a.log";
  std::string peer_;
};

TEST_F(FdStoreRestartTest, RegionsSurviveRestartsThroughTheStore) {
  ASSERT_NO_FATAL_FAILURE(Launch());
  auto b = DaemonProcess::Start(tmp_.path(), "b");
  ASSERT_TRUE(b.ok()) << b.status();
  {
    auto ca = Connect(socket_);
    ASSERT_TRUE(ca);
    ASSERT_TRUE(ca->CreateRegion("cache", 3 * kMiB, Access::kReadWrite).ok());
    ASSERT_TRUE(ca->CreateRegion("notes", 10000, Access::kNone).ok());
    auto cache = ca->MapRegion("cache");
    auto notes = ca->MapRegion("notes");
    ASSERT_TRUE(cache.ok() && notes.ok());
    FillPattern(cache->data(), 3 * kMiB, 1);
    FillPattern(notes->data(), 10000, 2);
    // Each region: its memfd and a record, in the store.
    std::vector<std::string> stored = manager_->StoredNames();
    EXPECT_EQ(Count(stored, "rdmad-mem-"), 2);
    EXPECT_EQ(Count(stored, "rdmad-rec-"), 2);
    EXPECT_THAT(stored, Each(StartsWith("rdmad-")));
    // An export change replaces the record (generation 2), never leaving
    // the region without one.
    ASSERT_TRUE(ca->Export("notes", Access::kRead).ok());
    stored = manager_->StoredNames();
    EXPECT_EQ(Count(stored, "rdmad-rec-"), 2);
    int second_generation = 0;
    for (const auto& name : stored) {
      second_generation += absl::EndsWith(name, "-2");
    }
    EXPECT_EQ(second_generation, 1);
  }
  auto cb = Connect((*b)->socket());
  ASSERT_TRUE(cb);
  auto buf = cb->Allocate(kMiB);
  ASSERT_TRUE(buf.ok());
  FillPattern(buf->data(), kMiB, 3);
  ASSERT_TRUE(cb->Write(*buf, 0, Named("cache"), 0, kMiB).ok());
  std::string old_descriptor;
  {
    auto ca = Connect(socket_);
    auto d = ca->GetDescriptor("cache");
    ASSERT_TRUE(d.ok());
    old_descriptor = *d;
  }

  uint64_t seed = 3;
  for (const int sig : {SIGTERM, SIGKILL}) {
    SCOPED_TRACE(sig == SIGKILL ? "SIGKILL" : "SIGTERM");
    ASSERT_NO_FATAL_FAILURE(Stop(sig));
    ASSERT_NO_FATAL_FAILURE(Launch());
    auto ca = Connect(socket_);
    ASSERT_TRUE(ca);
    auto listed = ca->ListRegions();
    ASSERT_TRUE(listed.ok());
    ASSERT_EQ(listed->size(), 2u) << Log();
    for (const auto& r : *listed) {
      EXPECT_EQ(r.export_access,
                r.name == "cache" ? Access::kReadWrite : Access::kRead);
      EXPECT_THAT(r.backing, StartsWith("memfd"));
    }
    auto cache = ca->MapRegion("cache");
    auto notes = ca->MapRegion("notes");
    ASSERT_TRUE(cache.ok() && notes.ok());
    EXPECT_EQ(PatternMismatch(cache->data(), kMiB, seed), -1);
    EXPECT_EQ(PatternMismatch(notes->data(), 10000, 2), -1);

    // The peer by name: at most one retry.
    FillPattern(buf->data(), kMiB, ++seed);
    int attempts = 1;
    auto written = cb->Write(*buf, 0, Named("cache"), 0, kMiB);
    if (!written.ok()) {
      ++attempts;
      written = cb->Write(*buf, 0, Named("cache"), 0, kMiB);
    }
    ASSERT_TRUE(written.ok()) << written.status();
    RecordProperty(
        sig == SIGKILL ? "attempts_after_sigkill" : "attempts_after_sigterm",
        attempts);
    EXPECT_EQ(PatternMismatch(cache->data(), kMiB, seed), -1);

    // The earlier run's descriptor is refused.
    RemoteRegion old_key;
    old_key.descriptor = old_descriptor;
    auto refused = cb->Read(*buf, 0, old_key, 0, 4096);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kNotFound)
        << refused.status();
    auto fresh = ca->GetDescriptor("cache");
    ASSERT_TRUE(fresh.ok());
    old_descriptor = *fresh;
    // Adoption does not store the regions a second time.
    EXPECT_THAT(manager_->StoredNames(), SizeIs(4));
  }
  EXPECT_THAT(Log(), HasSubstr("adopted 2 kept region(s) (3155728 bytes"));
  EXPECT_THAT(Log(), HasSubstr("named regions are kept across restarts in "
                               "the service manager's file descriptor store"));

  // rdmactl free: gone from the store too.
  auto freed = testing::RunProcess(
      {testing::RdmactlBinary(), "--socket", socket_, "free", "notes"});
  ASSERT_EQ(freed.exit_code, 0) << freed.err;
  EXPECT_THAT(manager_->StoredNames(), SizeIs(2));
  ASSERT_NO_FATAL_FAILURE(Stop(SIGTERM));
  EXPECT_THAT(Log(), HasSubstr("kept 1 named region(s) (3145728 bytes"));
}

TEST_F(FdStoreRestartTest, DamagedRecordIsSkippedAndDropped) {
  ASSERT_NO_FATAL_FAILURE(Launch());
  {
    auto ca = Connect(socket_);
    ASSERT_TRUE(ca->CreateRegion("good", 64 * kKiB, Access::kNone).ok());
    ASSERT_TRUE(ca->CreateRegion("bad", 64 * kKiB, Access::kNone).ok());
  }
  ASSERT_NO_FATAL_FAILURE(Stop(SIGKILL));
  // Damage "bad"'s record: same name in the store, one byte changed.
  std::string bad_record;
  for (const std::string& name : manager_->StoredNames()) {
    if (!absl::StartsWith(name, "rdmad-rec-")) continue;
    UniqueFd fd = manager_->Duplicate(name);
    char text[4096] = {};
    const ssize_t n = ::pread(fd.get(), text, sizeof(text), 0);
    ASSERT_GT(n, 0);
    std::string record(text, static_cast<size_t>(n));
    if (record.find("\nname bad\n") == std::string::npos) continue;
    bad_record = name;
    record[record.find("mode 0600") + 6] = '7';
    UniqueFd damaged(::memfd_create("damaged", MFD_CLOEXEC));
    ASSERT_EQ(::write(damaged.get(), record.data(), record.size()),
              static_cast<ssize_t>(record.size()));
    manager_->Replace(name, std::move(damaged));
  }
  ASSERT_FALSE(bad_record.empty());
  ASSERT_NO_FATAL_FAILURE(Launch());
  auto ca = Connect(socket_);
  auto listed = ca->ListRegions();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "good");
  const std::string slot = bad_record.substr(10, 16);
  EXPECT_THAT(Log(), HasSubstr(absl::StrCat("kept slot ", slot)));
  EXPECT_THAT(Log(), HasSubstr("damaged record: checksum"));
  EXPECT_THAT(Log(), HasSubstr("removed from the fd store"));
  EXPECT_THAT(Log(), HasSubstr("adopted 1 kept region(s)"));
  // Its memory and record are out of the store; the good region's stay.
  for (const std::string& name : manager_->StoredNames()) {
    EXPECT_THAT(name, Not(HasSubstr(slot)));
  }
  EXPECT_THAT(manager_->StoredNames(), SizeIs(2));
}

TEST_F(FdStoreRestartTest, KeepRegionsOnRestartFalseEmptiesTheStore) {
  ASSERT_NO_FATAL_FAILURE(Launch());
  {
    auto ca = Connect(socket_);
    ASSERT_TRUE(ca->CreateRegion("a", 64 * kKiB, Access::kNone).ok());
  }
  ASSERT_NO_FATAL_FAILURE(Stop(SIGTERM));
  WriteConfig("keep_regions_on_restart: false\n");
  ASSERT_NO_FATAL_FAILURE(Launch());
  EXPECT_THAT(manager_->StoredNames(), SizeIs(0));
  auto ca = Connect(socket_);
  auto listed = ca->ListRegions();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 0u);
  ASSERT_TRUE(ca->CreateRegion("b", 64 * kKiB, Access::kNone).ok());
  EXPECT_THAT(manager_->StoredNames(), SizeIs(0)) << "stored although told "
                                                     "not to keep regions";
  EXPECT_THAT(Log(), HasSubstr("discarded 1 region(s) an earlier run kept"));
}

TEST_F(FdStoreRestartTest, RestartsDoNotGrowTheStoreOrTheDaemon) {
  ASSERT_NO_FATAL_FAILURE(Launch());
  {
    auto ca = Connect(socket_);
    for (const char* name : {"r1", "r2", "r3"}) {
      ASSERT_TRUE(ca->CreateRegion(name, 64 * kKiB, Access::kReadWrite).ok());
    }
    ASSERT_TRUE(ca->Export("r1", Access::kRead).ok());
  }
  int first_fds = 0;
  for (int cycle = 1; cycle <= 10; ++cycle) {
    SCOPED_TRACE(absl::StrCat("cycle ", cycle));
    ASSERT_NO_FATAL_FAILURE(Stop(cycle % 2 == 0 ? SIGKILL : SIGTERM));
    ASSERT_NO_FATAL_FAILURE(Launch());
    ASSERT_THAT(manager_->StoredNames(), SizeIs(6));
    const int fds = testing::FdCount(daemon_->pid());
    if (cycle == 1) first_fds = fds;
    ASSERT_LE(fds, first_fds + 4) << "descriptors passed back are not closed";
  }
  auto ca = Connect(socket_);
  auto listed = ca->ListRegions();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 3u);
}

}  // namespace
}  // namespace rdmad
