// Hostile connections on the daemon's network ports (the Peer gRPC port and
// the TCP data port) — garbage, truncated frames, huge length prefixes,
// HTTP/2 prefaces that go nowhere — leave nothing behind: once they are
// closed the daemon's resident memory returns near where it was.
//
// The first burst raises the allocator's high-water mark (fragmentation in
// proportion to the connections open at once, a few KiB each), so the
// baseline is taken after a first burst; the bursts after it must not add
// to it. Skipped under the sanitizers, whose allocators keep memory on
// purpose.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/sanitized.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

[[maybe_unused]] uint64_t ResidentKiB(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}

[[maybe_unused]] int Open(int port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  return fd;
}

// A data frame header announcing `length` bytes of WRITE payload.
[[maybe_unused]] std::string WriteHeader(uint64_t length) {
  std::string h(48, '\0');
  const uint32_t magic = 0x31544452;
  std::memcpy(h.data(), &magic, 4);
  h[4] = 1;  // version
  h[5] = 1;  // WRITE
  std::memcpy(h.data() + 40, &length, 8);
  return h;
}

// 340 connections open at once, of every hostile kind, then closed.
[[maybe_unused]] void Burst(int peer_port, int data_port, std::mt19937& random) {
  std::string noise(1000, '\0');
  for (char& c : noise) c = static_cast<char>(random());
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  const std::vector<std::pair<int, std::string>> kinds = {
      {data_port, noise.substr(0, 200)},
      {data_port, WriteHeader(16 << 20).substr(0, 30)},  // truncated header
      {data_port, WriteHeader(16 << 20) + std::string(1000, 'x')},  // stalls
      {data_port, WriteHeader(1ull << 60)},  // huge length prefix
      {peer_port, noise.substr(0, 300)},
      {peer_port, preface + noise.substr(0, 100)},
      // An HTTP/2 frame header claiming 16 MiB.
      {peer_port, preface +
                      std::string("\xff\xff\xff\x00\x00\x00\x00\x00\x00", 9) +
                      std::string(1000, 'a')},
      {peer_port, preface},  // then silence
  };
  std::vector<int> fds;
  for (int i = 0; i < 340; ++i) {
    const auto& [port, bytes] = kinds[i % kinds.size()];
    const int fd = Open(port, bytes);
    if (fd >= 0) fds.push_back(fd);
  }
  absl::SleepFor(absl::Milliseconds(500));
  for (int fd : fds) ::close(fd);
}

TEST(ListenerMemoryTest, HostileConnectionsLeaveNothingBehind) {
#ifdef RDMAD_SANITIZED
  GTEST_SKIP() << "the sanitizers' allocators keep freed memory on purpose";
#else
  TempDir dir;
  auto daemon = DaemonProcess::Start(dir.path(), "d");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const pid_t pid = (*daemon)->pid();
  const int peer_port = std::stoi((*daemon)->peer_address().substr(
      (*daemon)->peer_address().rfind(':') + 1));
  const int data_port = DataPort(**daemon);
  ASSERT_GT(data_port, 0);
  std::mt19937 random(42);

  Burst(peer_port, data_port, random);
  absl::SleepFor(absl::Seconds(5));  // the daemon gives back what it can
  const uint64_t baseline = ResidentKiB(pid);
  ASSERT_GT(baseline, 0u);
  for (int i = 0; i < 5; ++i) Burst(peer_port, data_port, random);
  // Give it time (it looks every 2 s), however loaded the machine.
  // The daemon trims once it grew by 512 KiB; without that, five bursts
  // left about 3 MiB more on the build machine.
  constexpr uint64_t kSlackKiB = 2 << 10;
  uint64_t now = ResidentKiB(pid);
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (now > baseline + kSlackKiB && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(500));
    now = ResidentKiB(pid);
  }
  RecordProperty("baseline_kib", static_cast<int>(baseline));
  RecordProperty("after_kib", static_cast<int>(now));
  EXPECT_LE(now, baseline + kSlackKiB)
      << "RSS " << baseline << " KiB before five bursts of 340 hostile "
      << "connections, " << now << " KiB after";
  // And the daemon still serves.
  auto client = Connect(**daemon);
  ASSERT_TRUE(client);
  EXPECT_TRUE(client->GetStatus().ok());
#endif
}

// A WRITE the daemon rejects is drained (read and dropped) so that its
// connection stays usable. Connections that each sent only such a WRITE's
// header and then wait must not cost the daemon a drain buffer each.
TEST(ListenerMemoryTest, IdleRejectedWritesCostNoBufferEach) {
#ifdef RDMAD_SANITIZED
  GTEST_SKIP() << "the sanitizers' allocators keep memory on purpose";
#else
  TempDir dir;
  auto daemon = DaemonProcess::Start(dir.path(), "d");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const int data_port = DataPort(**daemon);
  ASSERT_GT(data_port, 0);
  const uint64_t before = ResidentKiB((*daemon)->pid());
  // Region 0 is nobody's: NOT_FOUND, then 16 MiB to drain, one byte sent.
  std::vector<int> fds;
  for (int i = 0; i < 300; ++i) {
    const int fd = Open(data_port, WriteHeader(16 << 20) + "x");
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  absl::SleepFor(absl::Seconds(1));  // let the daemon read them all
  const uint64_t during = ResidentKiB((*daemon)->pid());
  for (int fd : fds) ::close(fd);
  RecordProperty("before_kib", static_cast<int>(before));
  RecordProperty("during_kib", static_cast<int>(during));
  // A few KiB per connection; a 256 KiB buffer each was 75 MiB.
  EXPECT_LT(during, before + (16 << 10))
      << "RSS " << before << " KiB before 300 idle rejected WRITEs, "
      << during << " KiB with them";
#endif
}

// Anyone who reaches the data port can make the daemon close connections
// (garbage, half a frame) as fast as it can connect: it logs the first such
// close and then every 1000th, as it does refusals at accept, so that this
// cannot flood its log.
TEST(ListenerMemoryTest, HostileConnectionsCannotFloodTheLog) {
  TempDir dir;
  auto daemon = DaemonProcess::Start(dir.path(), "d", {.log_level = "info"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const int data_port = DataPort(**daemon);
  ASSERT_GT(data_port, 0);
  constexpr int kConnections = 2500;
  for (int i = 0; i < kConnections; ++i) {
    const int fd = Open(data_port, i % 2 == 0 ? "GET / HTTP/1.1\r\n\r\n"
                                              : WriteHeader(64).substr(0, 30));
    ASSERT_GE(fd, 0) << "connection " << i << " to port " << data_port << ": "
                     << std::strerror(errno);
    if (i % 2 == 1) ::shutdown(fd, SHUT_WR);  // the frame ends half-sent
    char c;
    // The daemon closes it (after its log line).
    EXPECT_LE(::recv(fd, &c, 1, 0), 0);
    ::close(fd);
  }
  std::ifstream in((*daemon)->log_path());
  std::string line;
  int logged = 0;
  while (std::getline(in, line)) {
    logged += line.find("closing connection from") != std::string::npos;
  }
  RecordProperty("close_lines", logged);
  // The 1st, 1001st and 2001st.
  EXPECT_EQ(logged, 3) << "for " << kConnections << " hostile connections";
  auto client = Connect(**daemon);
  ASSERT_TRUE(client);
  EXPECT_TRUE(client->GetStatus().ok());
}

}  // namespace
}  // namespace rdmad::testing
