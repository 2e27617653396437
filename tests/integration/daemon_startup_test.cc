// rdmad as an operator starts it: its command line (--help, --version, exit
// status 2 for a mistyped flag), taken ports (a second daemon must not start
// on them), the locked-memory limit on a TCP-only daemon, the open-files
// limit, and a session listener that does not spin when descriptors run out.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/session_wire.h"
#include "common/unique_fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// User plus system CPU time of `pid` so far, in clock ticks.
int64_t CpuTicks(pid_t pid) {
  const std::string stat = ReadTextFile(absl::StrCat("/proc/", pid, "/stat"));
  // Fields after the command (which may hold spaces) start after ") ".
  const size_t close = stat.rfind(") ");
  if (close == std::string::npos) return -1;
  const std::vector<std::string> fields =
      absl::StrSplit(stat.substr(close + 2), ' ');
  int64_t utime = 0;
  int64_t stime = 0;
  // utime and stime are fields 14 and 15 of /proc/PID/stat: 12 and 13 here.
  if (fields.size() < 14 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return -1;
  }
  return utime + stime;
}

int CountLines(const std::string& text, const std::string& needle) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, needle)) ++n;
  }
  return n;
}

TEST(DaemonCommandLineTest, HelpVersionAndMistypedFlags) {
  ProcessResult help = RunProcess({RdmadBinary(), "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, HasSubstr("Usage: rdmad"));
  EXPECT_THAT(help.out, HasSubstr("--peer_listen"));
  EXPECT_THAT(help.out, HasSubstr("--metrics_listen"));
  EXPECT_THAT(help.out, Not(HasSubstr("No flags matched")));

  ProcessResult version = RunProcess({RdmadBinary(), "--version"});
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_EQ(version.out, "rdmad 0.1.0\n");

  // What systemd's RestartPreventExitStatus=2 and the man page promise.
  ProcessResult typo = RunProcess({RdmadBinary(), "--peer_lisen=1.2.3.4:5"});
  EXPECT_EQ(typo.exit_code, 2) << typo.err;
  EXPECT_THAT(typo.err, HasSubstr("unknown flag '--peer_lisen'"));
  EXPECT_THAT(typo.err, HasSubstr("did you mean --peer_listen?"));
  ProcessResult no_value = RunProcess({RdmadBinary(), "--socket"});
  EXPECT_EQ(no_value.exit_code, 2) << no_value.err;
  EXPECT_THAT(no_value.err, HasSubstr("--socket needs a value"));
  ProcessResult argument = RunProcess({RdmadBinary(), "start"});
  EXPECT_EQ(argument.exit_code, 2) << argument.err;
  EXPECT_THAT(argument.err, HasSubstr("takes no arguments"));
}

TEST(DaemonPortsTest, ASecondDaemonOnATakenPortStopsAndNamesTheHolder) {
  TempDir dir;
  // FreeLoopbackPort's ports are free when it returns, but another
  // process (tests run in parallel) may take one before the daemon binds
  // it: then pick new ones, a bounded number of times.
  int data_port = 0;
  int metrics_port = 0;
  absl::StatusOr<std::unique_ptr<DaemonProcess>> first;
  for (int attempt = 0; attempt < 5; ++attempt) {
    data_port = FreeLoopbackPort();
    metrics_port = FreeLoopbackPort();
    first = DaemonProcess::Start(
        dir.path(), "first",
        {.extra_args = {"--data_listen", absl::StrCat("127.0.0.1:", data_port),
                        "--metrics_listen",
                        absl::StrCat("127.0.0.1:", metrics_port)}});
    if (first.ok() ||
        !absl::StrContains(first.status().message(), "cannot listen")) {
      break;
    }
  }
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string peer = (*first)->peer_address();
  const std::string holder = absl::StrCat("pid ", (*first)->pid(), " (rdmad)");

  struct Case {
    std::string flag;
    std::string address;
  };
  const std::vector<Case> cases = {
      {"--peer_listen", peer},
      {"--data_listen", absl::StrCat("127.0.0.1:", data_port)},
      {"--metrics_listen", absl::StrCat("127.0.0.1:", metrics_port)},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {
        RdmadBinary(), "--socket", dir.path() + "/second.sock", "--transport",
        "tcp", "--peer_listen", "127.0.0.1:0"};
    argv.push_back(c.flag);
    argv.push_back(c.address);
    ProcessResult second = RunProcess(argv, "", absl::Seconds(60));
    EXPECT_EQ(second.exit_code, 2) << c.flag << ": " << second.err;
    EXPECT_THAT(second.err, HasSubstr(absl::StrCat("cannot listen on ",
                                                   c.address)))
        << c.flag;
    EXPECT_THAT(second.err, HasSubstr(c.flag));
    EXPECT_THAT(second.err, HasSubstr(holder)) << c.flag;
  }
  // The first one never noticed.
  auto client = Connect(**first);
  ASSERT_TRUE(client);
  auto status = client->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->peer_count, 0u);

  // gRPC's SO_REUSEPORT is off on the Peer listener: not even a socket that
  // asks for port sharing may bind beside it.
  const size_t colon = peer.rfind(':');
  uint32_t port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(peer.substr(colon + 1), &port));
  UniqueFd sharer(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  ASSERT_EQ(::setsockopt(sharer.get(), SOL_SOCKET, SO_REUSEPORT, &one,
                         sizeof(one)),
            0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_NE(::bind(sharer.get(), reinterpret_cast<sockaddr*>(&addr),
                   sizeof(addr)),
            0);
  EXPECT_EQ(errno, EADDRINUSE);
}

// The default `ulimit -l` of 8 MiB says nothing about a TCP-only daemon,
// which pins nothing: an 80 MiB region, and staging buffers of several MiB,
// must work there. What caps its regions instead is half of the node's
// memory, and one uid may hold half of that.
TEST(DaemonLimitsTest, TcpDaemonIsNotCappedByTheLockedMemoryLimit) {
  TempDir dir;
  auto d = DaemonProcess::Start(
      dir.path(), "d",
      {.transport = "tcp",
       .command_prefix = {"/usr/bin/prlimit", "--memlock=8388608:8388608", "--"}});
  ASSERT_TRUE(d.ok()) << d.status();
  auto client = Connect(**d);
  ASSERT_TRUE(client);
  auto status = client->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->memlock_limit, std::optional<uint64_t>(8u << 20));
  const uint64_t memory = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                          static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(status->max_pinned_bytes, std::optional<uint64_t>(memory / 2));
  EXPECT_THAT(status->max_pinned_bytes_source,
              HasSubstr("half of this node's"));
  EXPECT_THAT(status->max_pinned_bytes_source, HasSubstr("no RDMA device"));

  auto kv = client->CreateRegion("kv", 80u << 20, Access::kReadWrite);
  ASSERT_TRUE(kv.ok()) << kv.status();
  auto staging = client->Allocate(16u << 20);
  ASSERT_TRUE(staging.ok()) << staging.status();
  auto done = client->Write(*staging, 0, Remote(**d, "kv"), 64u << 20,
                            16u << 20);
  ASSERT_TRUE(done.ok()) << done.status();
  status = client->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->pinned_bytes, 96u << 20);

  // One uid may hold half of the cap (quota_pinned_bytes_per_uid unset):
  // more than a quarter of the node's memory is refused, naming the quota.
  // (Refused before any memory is made: nothing is allocated here.)
  auto greedy =
      client->CreateRegion("greedy", memory / 4 + (1u << 20), Access::kNone);
  ASSERT_FALSE(greedy.ok());
  EXPECT_EQ(greedy.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(greedy.status().message(),
              HasSubstr("quota_pinned_bytes_per_uid"));

  // rdmactl status shows the cap in force, not only the OS limit.
  ProcessResult shown =
      RunProcess({RdmactlBinary(), "--socket", (*d)->socket(), "status"});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("memlock limit:     8 MiB"));
  EXPECT_THAT(shown.out, HasSubstr("(half of this node's"));
}

TEST(DaemonLimitsTest, ConfiguredCapIsNamedWithSizesPeopleRead) {
  TempDir dir;
  const std::string config = dir.path() + "/rdmad.conf";
  std::ofstream(config) << "max_pinned_bytes: 16777216\n";
  auto d = DaemonProcess::Start(
      dir.path(), "d", {.transport = "tcp", .extra_args = {"--config", config}});
  ASSERT_TRUE(d.ok()) << d.status();
  auto client = Connect(**d);
  ASSERT_TRUE(client);
  auto over = client->CreateRegion("kv", 80u << 20, Access::kNone);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(),
              HasSubstr("allocating 80 MiB would bring all regions to 80 MiB, "
                        "over max_pinned_bytes of 16 MiB (config "
                        "max_pinned_bytes)"));
  auto status = client->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->max_pinned_bytes, std::optional<uint64_t>(16u << 20));
}

// Each region holds a descriptor: under a soft limit of 1024 the daemon
// must still hold more than a thousand (it raises the soft limit to the
// hard one), and list them a page at a time.
TEST(DaemonLimitsTest, RegionsPastTheSoftOpenFilesLimit) {
  TempDir dir;
  auto d = DaemonProcess::Start(
      dir.path(), "d",
      {.command_prefix = {"/usr/bin/prlimit", "--nofile=1024:4096", "--"}});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT((*d)->Log(),
              HasSubstr("open files limit raised from 1024 to 4096"));
  auto client = Connect(**d);
  ASSERT_TRUE(client);
  constexpr int kRegions = 1100;
  for (int i = 0; i < kRegions; ++i) {
    auto region =
        client->CreateRegion(absl::StrCat("r", i), 4096, Access::kNone);
    ASSERT_TRUE(region.ok()) << i << ": " << region.status();
  }
  // The library follows the pages (1000 by default): all of them, in order.
  auto regions = client->ListRegions();
  ASSERT_TRUE(regions.ok()) << regions.status();
  ASSERT_EQ(regions->size(), static_cast<size_t>(kRegions));
  for (size_t i = 1; i < regions->size(); ++i) {
    ASSERT_LT((*regions)[i - 1].id, (*regions)[i].id);
  }
  // So does rdmactl.
  ProcessResult listed = RunProcess(
      {RdmactlBinary(), "--socket", (*d)->socket(), "regions", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(CountLines(listed.out, "\"name\": \"r"), kRegions);
}

// With descriptors gone, the session listener backs off instead of
// spinning on a connection it cannot accept, logs a line, not hundreds of
// thousands, and recovers once descriptors are back.
TEST(DaemonLimitsTest, ExhaustedDescriptorsDoNotMakeTheListenerSpin) {
  TempDir dir;
  auto d = DaemonProcess::Start(
      dir.path(), "d",
      {.command_prefix = {"/usr/bin/prlimit", "--nofile=96:96", "--"},
       .log_level = "info"});
  ASSERT_TRUE(d.ok()) << d.status();
  // Regions take the daemon's descriptors (one memfd each) until none is
  // left. (Sessions alone would not: the daemon caps sessions per uid well
  // below its descriptor limit.)
  auto owner = Client::Connect({.socket_path = (*d)->socket()});
  ASSERT_TRUE(owner.ok()) << owner.status();
  // Freed once first: the sanitizer pass's UndefinedBehaviorSanitizer
  // checks a virtual call's object the first time it meets its type by
  // probing the memory through a pipe(2), which fails while the daemon has
  // no descriptor left and would report the free below as bad; after one
  // free its types are known.
  ASSERT_TRUE((*owner)->CreateRegion("warm", 4096, Access::kNone).ok());
  ASSERT_TRUE((*owner)->FreeRegion("warm").ok());
  int made = 0;
  for (; made < 200; ++made) {
    if (!(*owner)->CreateRegion(absl::StrCat("fd", made), 4096, Access::kNone)
             .ok()) {
      break;
    }
  }
  ASSERT_LT(made, 200) << "the daemon never ran out of descriptors";
  // Connections opened by hand (no gRPC), to the session socket and to
  // the Local service's socket, now find none; they wait in the listen
  // queues.
  std::vector<UniqueFd> sessions;
  for (const auto& [path, type] :
       {std::pair{session_wire::SessionSocketPath((*d)->socket()),
                  SOCK_SEQPACKET},
        std::pair{(*d)->socket(), SOCK_STREAM}}) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    for (int i = 0; i < 120; ++i) {
      // Non-blocking: a full listen queue answers EAGAIN instead of
      // waiting.
      UniqueFd fd(::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      ASSERT_TRUE(fd);
      if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr),
                    sizeof(addr)) != 0) {
        break;  // the listen queue is full too
      }
      sessions.push_back(std::move(fd));
    }
  }
  // Wait (bounded) for the daemon to say it ran out, on both listeners.
  const std::string session_line =
      "accept on " + session_wire::SessionSocketPath((*d)->socket()) + " ";
  const std::string local_line = "accept on " + (*d)->socket() + " ";
  const absl::Time said_by = absl::Now() + absl::Seconds(30);
  while ((CountLines((*d)->Log(), session_line) == 0 ||
          CountLines((*d)->Log(), local_line) == 0) &&
         absl::Now() < said_by) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GE(CountLines((*d)->Log(), session_line), 1)
      << (*d)->LogTail();
  ASSERT_GE(CountLines((*d)->Log(), local_line), 1)
      << (*d)->LogTail();
  EXPECT_THAT((*d)->Log(), HasSubstr("Too many open files"));

  // A spinning loop burns a core; a backing-off one close to nothing.
  const int64_t before = CpuTicks((*d)->pid());
  absl::SleepFor(absl::Seconds(3));
  const int64_t used = CpuTicks((*d)->pid()) - before;
  const int64_t ticks_per_second = ::sysconf(_SC_CLK_TCK);
  EXPECT_LT(used, ticks_per_second / 2)
      << "the daemon used " << used << " ticks in 3 s with descriptors gone";
  // One line per listener per 10 s.
  EXPECT_LE(CountLines((*d)->Log(), "accept on"), 4)
      << (*d)->LogTail();

  // Descriptors back: new clients get in again.
  sessions.clear();
  for (int i = 0; i < std::min(made, 16); ++i) {
    const absl::Status freed = (*owner)->FreeRegion(absl::StrCat("fd", i));
    ASSERT_TRUE(freed.ok()) << freed << "\n" << (*d)->LogTail();
  }
  const absl::Time back_by = absl::Now() + absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<Client>> client =
      absl::UnavailableError("not tried");
  while (absl::Now() < back_by) {
    client = Client::Connect({.socket_path = (*d)->socket(),
                               .timeout = absl::Seconds(5)});
    if (client.ok() && (*client)->GetStatus().ok()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->GetStatus().ok());
}

}  // namespace
}  // namespace rdmad::testing
