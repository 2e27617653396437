// The daemon's thread count does not grow with its number of peers: every
// data channel lives on the fixed pool of I/O loops (daemon/runtime).
//
// One daemon (B) listens on every address of this host, so that daemon A
// reaches it as 32 different peers, 127.0.0.1 ... 127.0.0.32 (all loopback):
// 32 peer entries, 32 TCP data channels, 128 data connections.
#include <dirent.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

int ThreadsOf(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n;
}

// The thread count once it has stopped changing (gRPC starts some of its
// threads lazily), sampled over a few seconds.
int SettledThreads(pid_t pid) {
  int last = ThreadsOf(pid);
  for (int stable = 0, i = 0; stable < 5 && i < 50; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    const int now = ThreadsOf(pid);
    stable = now == last ? stable + 1 : 0;
    last = now;
  }
  return last;
}

TEST(DaemonThreadsTest, ThirtyTwoPeersRunOnTheThreadsOfOne) {
  TempDir dir;
  auto a = DaemonProcess::Start(dir.path(), "a", {.transport = "tcp"});
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = DaemonProcess::Start(
      dir.path(), "b", {.transport = "tcp", .peer_listen = "0.0.0.0:0"});
  ASSERT_TRUE(b.ok()) << b.status();
  const std::string& advertised = (*b)->peer_address();
  const std::string port = advertised.substr(advertised.rfind(':') + 1);
  {
    auto cb = Connect(**b);
    ASSERT_TRUE(cb);
    ASSERT_TRUE(cb->CreateRegion("dst", 1 << 16, Access::kReadWrite).ok());
  }
  auto ca = Connect(**a);
  ASSERT_TRUE(ca);
  auto src = ca->Allocate(1 << 16);
  ASSERT_TRUE(src.ok()) << src.status();
  auto write_via = [&](int k) {
    RemoteRegion dst;
    dst.peer = absl::StrCat("127.0.0.", k, ":", port);
    dst.name = "dst";
    // Several sizes, so that every data connection of the channel is used.
    for (uint64_t len : {8ull, 4096ull, 60000ull}) {
      auto done = ca->Write(*src, 0, dst, 0, len);
      ASSERT_TRUE(done.ok()) << dst.peer << ": " << done.status();
    }
  };
  write_via(1);
  const int one_peer = SettledThreads((*a)->pid());
  ASSERT_GT(one_peer, 0);
  for (int k = 2; k <= 32; ++k) write_via(k);
  auto peers = ca->ListPeers();
  ASSERT_TRUE(peers.ok()) << peers.status();
  ASSERT_EQ(peers->size(), 32u);
  for (const auto& p : *peers)
    EXPECT_EQ(p.state, PeerState::kReady) << p.address;
  const int many_peers = SettledThreads((*a)->pid());
  // A thread per peer would add 31 or more. gRPC's own pools may grow by a
  // thread under load (19 against 18 once, under ASan on a busy machine):
  // a slack of 2 that does not grow with the peers.
  EXPECT_LE(many_peers, one_peer + 2)
      << "1 peer: " << one_peer << " threads; 32 peers: " << many_peers;
}

}  // namespace
}  // namespace rdmad::testing
