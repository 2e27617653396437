// The daemon under its own resource limits, as an unlucky operator or a
// hostile local user would leave it:
//   - RLIMIT_NOFILE low, running as its own (non-root) user: a client that
//     asks for region descriptors and never receives them (SCM_RIGHTS in
//     flight, charged to the daemon's user by the kernel) gets its own
//     sessions ended; everyone else's sessions, old and new, keep working;
//   - RLIMIT_FSIZE small: a region larger than that is refused with
//     RESOURCE_EXHAUSTED (EFBIG) instead of SIGXFSZ killing the daemon.
//   - one local user who runs a daemon of their own and names many live
//     addresses of it through this daemon holds at most max_peers_per_uid
//     peer slots, and cannot deny another user new peers once the table is
//     full: the other user's new peers take that user's idlest slots.
// Needs root (to run the daemon and the hostile client as other uids);
// skipped loudly otherwise.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;

// Uids no other test uses: the kernel counts descriptors in flight per user.
constexpr uint32_t kDaemonUid = 64990;
constexpr uint32_t kHoarderUid = 64991;
constexpr uint32_t kPeerHogUid = 64992;

class DaemonLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "\n\n*** SKIPPED: running rdmad and a hostile client "
                      "as other uids needs root; run the suite as root (CI "
                      "does) to cover it. ***\n";
    }
    // The daemon (another uid) creates its sockets here.
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
  }

  std::unique_ptr<DaemonProcess> StartLimited(const std::string& name,
                                              const std::string& uid,
                                              const std::string& nofile,
                                              const std::string& fsize) {
    DaemonOptions options;
    options.command_prefix = {LIMITED_LAUNCHER_PATH, uid, nofile, fsize, "--"};
    return StartDaemonOrNull(dir_, name, std::move(options));
  }

  TempDir dir_;
};

// Reads `path` until it holds a line, or 60 s pass.
std::string FirstLine(const std::string& path) {
  const absl::Time until = absl::Now() + absl::Seconds(60);
  while (absl::Now() < until) {
    std::ifstream in(path);
    std::string line;
    if (std::getline(in, line) && in.good()) return line;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return "";
}

TEST_F(DaemonLimitsTest, DescriptorsInFlightEndOnlyTheHoardersSessions) {
  auto daemon = StartLimited("nofile", absl::StrCat(kDaemonUid), "256", "-");
  ASSERT_TRUE(daemon);
  // A bystander (root) with a session, a buffer and a mapped region.
  auto bystander = Connect(*daemon);
  ASSERT_TRUE(bystander);
  auto before = bystander->Allocate(4096);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(bystander->CreateRegion("shared", 4096, Access::kNone).ok());

  // The hoarder: 8 sessions x 100 descriptors asked for and never
  // received, 800 in all, far over the daemon's 256 descriptors. Held for
  // a minute at most (killed sooner below).
  const std::string log = dir_.path() + "/hoarder.out";
  auto hoarder = ChildProcess::Spawn(
      {ACCESS_PROBE_PATH, daemon->socket(), absl::StrCat(kHoarderUid),
       absl::StrCat(kHoarderUid), "hoard-fds", "8", "100", "60"},
      log);
  ASSERT_TRUE(hoarder.ok()) << hoarder.status();
  const std::string line = FirstLine(log);
  // Its sessions were ended: its token is no longer valid.
  EXPECT_EQ(std::atoi(line.c_str()), 16) << line;  // UNAUTHENTICATED
  EXPECT_THAT(daemon->LogTail(), HasSubstr("in flight"));

  // While it holds what it hoarded, everyone else works: the existing
  // session maps regions and allocates, and new sessions open and do too.
  auto mapped = bystander->MapRegion("shared");
  EXPECT_TRUE(mapped.ok()) << mapped.status() << daemon->LogTail();
  auto after = bystander->Allocate(4096);
  EXPECT_TRUE(after.ok()) << after.status();
  for (int i = 0; i < 3; ++i) {
    auto fresh = Connect(*daemon);
    ASSERT_TRUE(fresh);
    auto buffer = fresh->Allocate(4096);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_TRUE(fresh->MapRegion("shared").ok());
  }
  (*hoarder)->Signal(SIGKILL);
  (void)(*hoarder)->Wait(absl::Seconds(10));
  // And after the hoarder is gone, still.
  EXPECT_TRUE(bystander->MapRegion("shared").ok());
  EXPECT_EQ(::kill(daemon->pid(), 0), 0);
}

TEST_F(DaemonLimitsTest, RegionOverTheFileSizeLimitIsRefusedNotFatal) {
  // Root keeps its capabilities, so the memlock limit is no obstacle; the
  // file size limit applies to root as well.
  auto daemon = StartLimited("fsize", "-", "-", absl::StrCat(1 << 20));
  ASSERT_TRUE(daemon);
  auto client = Connect(*daemon);
  ASSERT_TRUE(client);
  auto big = client->Allocate(4 << 20);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted)
      << big.status();
  EXPECT_THAT(big.status().message(), HasSubstr("RLIMIT_FSIZE"));
  auto named = client->CreateRegion("big", 2 << 20, Access::kNone);
  EXPECT_EQ(named.status().code(), absl::StatusCode::kResourceExhausted);
  // Alive, and what fits still works.
  EXPECT_EQ(::kill(daemon->pid(), 0), 0) << daemon->LogTail();
  EXPECT_TRUE(client->GetStatus().ok());
  auto small = client->Allocate(512 << 10);
  EXPECT_TRUE(small.ok()) << small.status();
}

TEST_F(DaemonLimitsTest, OneUidsPeersCannotDenyOtherUidsNewPeers) {
  // Their own daemon, on every address of this host: through this daemon
  // it is as many live peers as there are addresses in 127.0.0.0/8.
  DaemonOptions theirs;
  theirs.transport = "tcp";
  theirs.peer_listen = "0.0.0.0:0";
  theirs.command_prefix = {LIMITED_LAUNCHER_PATH, absl::StrCat(kPeerHogUid),
                           "-", "-", "--"};
  auto b = DaemonProcess::Start(dir_.path(), "theirs", theirs);
  ASSERT_TRUE(b.ok()) << b.status();
  const std::string& advertised = (*b)->peer_address();
  const std::string port = advertised.substr(advertised.rfind(':') + 1);
  {
    auto cb = Connect(**b);
    ASSERT_TRUE(cb);
    ASSERT_TRUE(cb->CreateRegion("dst", 4096, Access::kReadWrite).ok());
  }
  // This node's daemon: 8 peer slots, at most 6 for one uid.
  const std::string config = dir_.path() + "/node.conf";
  std::ofstream(config) << "max_peers: 8\nmax_peers_per_uid: 6\n";
  auto a = DaemonProcess::Start(
      dir_.path(), "node",
      {.transport = "tcp", .extra_args = {"--config", config}});
  ASSERT_TRUE(a.ok()) << a.status();

  // The other user names 8 live addresses, one after the other.
  const std::string uid = absl::StrCat(kPeerHogUid);
  auto as_them = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {ACCESS_PROBE_PATH, (*a)->socket(), uid,
                                     uid};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessResult r = RunProcess(argv, "", absl::Seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  ASSERT_EQ(std::atoi(as_them({"alloc", "hog", "4096", "0600"}).c_str()), 0);
  for (int k = 1; k <= 8; ++k) {
    const std::string out =
        as_them({"send", "hog", "dst", absl::StrCat("127.1.0.", k, ":", port)});
    EXPECT_EQ(std::atoi(out.c_str()), 0) << "peer " << k << ": " << out;
  }
  auto root = Connect(**a);
  ASSERT_TRUE(root);
  auto count = [&](absl::string_view prefix) {
    auto peers = root->ListPeers();
    EXPECT_TRUE(peers.ok()) << peers.status();
    int n = 0;
    for (const auto& p : peers.ok() ? *peers : std::vector<PeerInfo>{}) {
      if (absl::StartsWith(p.address, prefix) &&
          p.state == PeerState::kReady) {
        ++n;
      }
    }
    return n;
  };
  EXPECT_EQ(count("127.1."), 6) << "their slots: max_peers_per_uid";

  // Another user (root here) gets new peers: two into the free slots, the
  // third into the slot of their idlest peer, none refused.
  auto buffer = root->Allocate(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  for (int k = 1; k <= 3; ++k) {
    RemoteRegion dst;
    dst.peer = absl::StrCat("127.2.0.", k, ":", port);
    dst.name = "dst";
    auto done = root->Write(*buffer, 0, dst, 0, 16);
    EXPECT_TRUE(done.ok()) << dst.peer << ": " << done.status();
  }
  EXPECT_EQ(count("127.2."), 3);
  EXPECT_EQ(count("127.1."), 5);
  EXPECT_THAT((*a)->Log(), HasSubstr("to make room for 127.2.0.3:"));
}

}  // namespace
}  // namespace rdmad::testing
