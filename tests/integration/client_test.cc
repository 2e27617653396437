// The client library against real rdmad processes: sessions, buffers,
// named regions, local transfers, and cleanup when clients or daemons die.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "client/shared_queue.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;

void FillPattern(char* data, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<char>(rng());
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = DaemonProcess::Start(dir_.path(), "d1");
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    auto c = Client::Connect({.socket_path = daemon_->socket()});
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }

  size_t RegionCount() {
    auto regions = client_->ListRegions();
    EXPECT_TRUE(regions.ok()) << regions.status();
    return regions.ok() ? regions->size() : 0;
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(ClientTest, StatusDescribesTheDaemon) {
  auto status = client_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->version, "0.1.0");
  EXPECT_NE(status->incarnation, 0u);
  EXPECT_EQ(status->transport, Transport::kTcp);
  EXPECT_EQ(status->local_socket, daemon_->socket());
  EXPECT_EQ(status->session_count, 1u);
  EXPECT_EQ(status->pid, static_cast<uint32_t>(daemon_->pid()));
  auto devices = client_->ListDevices();
  ASSERT_TRUE(devices.ok());
  EXPECT_TRUE(devices->devices.empty());
  EXPECT_THAT(devices->note, HasSubstr("TCP"));
}

TEST_F(ClientTest, BufferIsSharedMemoryWithTheDaemon) {
  auto buffer = client_->Allocate(1 << 20);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_EQ(buffer->size(), 1u << 20);
  FillPattern(buffer->data(), buffer->size(), 1);

  auto region = client_->CreateRegion("target", (1 << 20) + 7,
                                      Access::kReadWrite);
  ASSERT_TRUE(region.ok()) << region.status();
  // The daemon copies out of the client's mapping: what we wrote is what
  // it sees, with no copy through gRPC.
  RemoteRegion target{.name = "target"};
  auto written = client_->Write(*buffer, 3, target, 7, (1 << 20) - 3);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->bytes, (1u << 20) - 3);

  auto view = client_->MapRegion("target");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_FALSE(view->owned());
  EXPECT_EQ(std::memcmp(view->data() + 7, buffer->data() + 3, (1 << 20) - 3), 0);

  auto back = client_->Allocate(1 << 20);
  ASSERT_TRUE(back.ok());
  auto read = client_->Read(*back, 0, target, 7, (1 << 20) - 3);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(std::memcmp(back->data(), buffer->data() + 3, (1 << 20) - 3), 0);
}

TEST_F(ClientTest, ReleasingBuffersFreesThemInTheDaemon) {
  {
    auto a = client_->Allocate(4096);
    auto b = client_->Allocate(8192);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(RegionCount(), 2u);
    EXPECT_TRUE(a->Release().ok());
    EXPECT_EQ(RegionCount(), 1u);
  }
  EXPECT_EQ(RegionCount(), 0u);
}

// A Buffer destroyed after its Client frees its region through the session
// they share (it used to call into the destroyed Client: a use after free,
// which ASan reports). Until then the session and the region stay, and the
// memory stays usable.
TEST_F(ClientTest, ABufferMayOutliveItsClient) {
  auto other = Client::Connect({.socket_path = daemon_->socket()});
  ASSERT_TRUE(other.ok()) << other.status();
  auto buf = (*other)->Allocate(4096, {.name = "kept"});
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto moved = std::make_unique<Buffer>(*std::move(buf));
  other->reset();
  std::memset(moved->data(), 7, moved->size());
  auto status = client_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->session_count, 2u) << "the buffer keeps its session";
  auto regions = client_->ListRegions();
  ASSERT_TRUE(regions.ok()) << regions.status();
  bool listed = false;
  for (const RegionInfo& r : *regions) listed |= r.name == "kept";
  EXPECT_TRUE(listed) << "the region went with its Client";
  EXPECT_TRUE(moved->Release().ok());
  regions = client_->ListRegions();
  ASSERT_TRUE(regions.ok()) << regions.status();
  for (const RegionInfo& r : *regions) EXPECT_NE(r.name, "kept");
  moved.reset();
  // The daemon sees the session's socket close a moment later.
  uint64_t sessions = 0;
  for (int i = 0; i < 300; ++i) {
    auto now = client_->GetStatus();
    ASSERT_TRUE(now.ok()) << now.status();
    sessions = now->session_count;
    if (sessions == 1) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(sessions, 1u) << "the session outlived its last buffer";
}

TEST_F(ClientTest, RegistersTheClientsOwnMemfd) {
  const int fd = ::memfd_create("mine", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 65536), 0);
  char* mine = static_cast<char*>(
      ::mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(mine, MAP_FAILED);
  FillPattern(mine, 65536, 7);
  auto buffer = client_->Register(fd, 65536, {.name = "mine"});
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(std::memcmp(buffer->data(), mine, 65536), 0);
  auto regions = client_->ListRegions();
  ASSERT_TRUE(regions.ok());
  ASSERT_EQ(regions->size(), 1u);
  EXPECT_EQ((*regions)[0].backing, "client-memfd");
  EXPECT_EQ((*regions)[0].name, "mine");
  ::munmap(mine, 65536);
  ::close(fd);
}

TEST_F(ClientTest, RegisterRejectsWhatIsNotUsableMemory) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  EXPECT_FALSE(client_->Register(pipe_fds[0], 4096).ok());
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);

  const int small = ::memfd_create("small", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(::ftruncate(small, 4096), 0);
  auto too_big = client_->Register(small, 8192);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kOutOfRange)
      << too_big.status();
  ::close(small);
  EXPECT_EQ(RegionCount(), 0u);
  // The daemon is fine afterwards.
  EXPECT_TRUE(client_->Allocate(4096).ok());
}

TEST_F(ClientTest, PreciseErrors) {
  EXPECT_EQ(client_->Allocate(0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Allocate(1ull << 62).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(client_->CreateRegion("dup", 4096, Access::kNone).ok());
  auto dup = client_->CreateRegion("dup", 4096, Access::kNone);
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(dup.status().message(), HasSubstr("dup"));
  EXPECT_EQ(client_->FreeRegion("missing").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->CreateRegion("bad name", 10, Access::kNone).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto buffer = client_->Allocate(4096);
  ASSERT_TRUE(buffer.ok());
  RemoteRegion dup_region{.name = "dup"};
  // A region of this daemon by name: its own permissions decide (the
  // owner may write it), exported or not; an export grants peers, never
  // more or less to local users.
  EXPECT_TRUE(client_->Write(*buffer, 0, dup_region, 0, 10).ok());
  ASSERT_TRUE(client_->Export("dup", Access::kRead).ok());
  EXPECT_TRUE(client_->Write(*buffer, 0, dup_region, 0, 10).ok());
  EXPECT_EQ(client_->Write(*buffer, 0, RemoteRegion{.name = "missing"}, 0, 10)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  auto missing = client_->Write(*buffer, 0, {.name = "missing"}, 0, 10);
  EXPECT_THAT(missing.status().message(), HasSubstr("'missing'"));
  ASSERT_TRUE(client_->Export("dup", Access::kReadWrite).ok());
  auto past_end = client_->Write(*buffer, 0, dup_region, 4090, 10);
  EXPECT_EQ(past_end.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(client_->Write(*buffer, 0, dup_region, ~0ull - 3, 10).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(client_->Write(*buffer, 4000, dup_region, 0, 100).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(client_->Write(*buffer, 0, dup_region, 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  // After all of that, the daemon still serves transfers.
  EXPECT_TRUE(client_->Write(*buffer, 0, dup_region, 0, 4096).ok());
}

TEST_F(ClientTest, BatchReportsEachOperation) {
  ASSERT_TRUE(client_->CreateRegion("b", 4096, Access::kReadWrite).ok());
  auto buffer = client_->Allocate(4096);
  ASSERT_TRUE(buffer.ok());
  FillPattern(buffer->data(), 4096, 3);
  const RemoteRegion b{.name = "b"};
  const RemoteRegion nope{.name = "nope"};
  std::vector<Op> ops;
  for (uint64_t i = 0; i < 4; ++i) {
    ops.push_back({.kind = Op::Kind::kWrite,
                   .local = &*buffer,
                   .local_offset = i * 1024,
                   .remote = &b,
                   .remote_offset = i * 1024,
                   .length = 1024,
                   .tag = 70 + i});
  }
  ops.push_back({.kind = Op::Kind::kWrite,
                 .local = &*buffer,
                 .remote = &b,
                 .remote_offset = 4000,
                 .length = 1024,
                 .tag = 74});
  ops.push_back({.kind = Op::Kind::kRead,
                 .local = &*buffer,
                 .remote = &nope,
                 .length = 1,
                 .tag = 75});
  auto results = client_->Batch(ops);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 6u);
  // Each op's own result: its tag, its status, and what it moved how.
  for (uint64_t i = 0; i < 6; ++i) EXPECT_EQ((*results)[i].tag, 70 + i);
  for (int i = 0; i < 4; ++i) {
    const Completion& done = (*results)[i];
    EXPECT_TRUE(done.status.ok()) << done.status;
    EXPECT_EQ(done.bytes, 1024u);
    EXPECT_EQ(done.transport, Transport::kLocal);
  }
  EXPECT_EQ((*results)[4].status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*results)[4].bytes, 0u);
  EXPECT_EQ((*results)[5].status.code(), absl::StatusCode::kNotFound);
  auto view = client_->MapRegion("b");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(std::memcmp(view->data(), buffer->data(), 4096), 0);
}

// Client::Write/Read/Batch run on one SharedQueue. A call that gave up
// waiting (the daemon did not report in time) left its operations'
// outcomes to be kept for good once they came: a long-lived client whose
// daemon stalled now and then grew without bound (found by review). They
// are dropped now, whether they came before or after the call gave up.
TEST_F(ClientTest, OutcomesOfAnAbandonedCallAreNotKept) {
  ASSERT_TRUE(client_->CreateRegion("s", 4096, Access::kReadWrite).ok());
  auto buffer = client_->Allocate(4096);
  ASSERT_TRUE(buffer.ok());
  client_internal::SharedQueue queue(client_.get());
  const RemoteRegion s{.name = "s"};
  const std::vector<Op> ops = {
      {.kind = Op::Kind::kWrite, .local = &*buffer, .remote = &s, .length = 64},
      {.kind = Op::Kind::kWrite,
       .local = &*buffer,
       .local_offset = 64,
       .remote = &s,
       .remote_offset = 64,
       .length = 64}};
  auto first = queue.Run(ops, absl::Seconds(5));  // opens queue and handle
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(queue.KeptForTest(), 0u);
  // The daemon stops answering: the call gives up (its timeout plus the
  // grace for the daemon's own report), with both operations in the ring.
  ASSERT_TRUE(daemon_->Pause());
  auto abandoned = queue.Run(ops, absl::Milliseconds(100));
  EXPECT_EQ(abandoned.status().code(), absl::StatusCode::kDeadlineExceeded)
      << abandoned.status();
  daemon_->Resume();
  // The next call collects its own outcome and, before it, the two the
  // abandoned call left.
  auto next = queue.Run(ops, absl::Seconds(5));
  ASSERT_TRUE(next.ok()) << next.status();
  for (const Completion& r : *next) EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(queue.KeptForTest(), 0u)
      << "outcomes nobody waits for are kept";
}

// A child of fork() inherits the parent's session socket, gRPC connection
// and queue memory. A probe that forked with a Client open found its child
// submitting on the parent's ring (the parent then polled the child's tag),
// closing the parent's queue and freeing its buffer in the daemon as it
// destroyed its copies, and hanging in gRPC's teardown. In the child every
// call fails FAILED_PRECONDITION now, and destroying its copies frees and
// closes nothing of the parent's.
TEST_F(ClientTest, AForkedChildLeavesTheParentsSessionAlone) {
  ASSERT_TRUE(client_->CreateRegion("target", 4096, Access::kNone).ok());
  auto handle = client_->OpenRemote({.name = "target"});
  ASSERT_TRUE(handle.ok()) << handle.status();
  auto queue = client_->OpenQueue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  auto buffer = client_->Allocate(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  Op op{.kind = Op::Kind::kWrite,
        .local = &*buffer,
        .remote = &*handle,
        .length = 8,
        .tag = 1};

  const pid_t pid = ::fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    // gtest's checks do not reach the parent: a bit of the exit status
    // says which one failed.
    int failed = 0;
    op.tag = 2;
    const auto submitted = (*queue)->Submit({&op, 1});
    if (!absl::IsFailedPrecondition(submitted.status()) ||
        !absl::StrContains(submitted.status().message(),
                           "Connect a new Client in the child")) {
      failed |= 1;
    }
    if (!absl::IsFailedPrecondition((*queue)->Wait(absl::Seconds(1)))) {
      failed |= 2;
    }
    if (!absl::IsFailedPrecondition((*queue)->status())) failed |= 4;
    if (!absl::IsFailedPrecondition(client_->Allocate(4096).status())) {
      failed |= 8;
    }
    if (!absl::IsFailedPrecondition(
            client_->Write(*buffer, 0, {.name = "target"}, 0, 8).status())) {
      failed |= 16;
    }
    // What a process that forks and returns does: destroy its copies.
    if (!buffer->Release().ok()) failed |= 32;
    queue->reset();
    client_.reset();
    ::_exit(failed);
  }
  auto child = ChildProcess::Own(pid);
  auto status = child->Wait(absl::Seconds(60));
  ASSERT_TRUE(status.ok()) << "the child hung: " << status.status();
  ASSERT_TRUE(WIFEXITED(*status)) << "the child crashed: " << *status;
  EXPECT_EQ(WEXITSTATUS(*status), 0) << "bits of the checks that failed";

  // The parent's buffer and queue are as they were, and its ring carries
  // its own operation only.
  auto regions = client_->ListRegions();
  ASSERT_TRUE(regions.ok()) << regions.status();
  bool found = false;
  for (const RegionInfo& region : *regions) found |= region.id == buffer->id();
  EXPECT_TRUE(found) << "the child freed the parent's buffer";
  ASSERT_TRUE((*queue)->status().ok()) << (*queue)->status();
  auto queued = (*queue)->Submit({&op, 1});
  ASSERT_TRUE(queued.ok()) << queued.status();
  ASSERT_EQ(*queued, 1u);
  ASSERT_TRUE((*queue)->Wait(absl::Now() + absl::Seconds(30)).ok());
  Completion done[4];
  ASSERT_EQ((*queue)->Poll(done), 1u);
  EXPECT_EQ(done[0].tag, 1u);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
}

TEST_F(ClientTest, KilledClientLeavesNoBufferBehind) {
  const std::string log = dir_.path() + "/client.log";
  auto child = ChildProcess::Spawn(
      {TEST_CLIENT_PATH, daemon_->socket(), "1048576"}, log);
  ASSERT_TRUE(child.ok()) << child.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (RegionCount() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(RegionCount(), 1u) << "test client never allocated";
  (*child)->Signal(SIGKILL);
  ASSERT_TRUE((*child)->Wait(absl::Seconds(10)).ok());
  // The kernel closes the session socket; the daemon frees at once.
  const absl::Time gone_by = absl::Now() + absl::Seconds(5);
  while (RegionCount() != 0 && absl::Now() < gone_by) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(RegionCount(), 0u);
  auto status = client_->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->session_count, 1u);  // only ours
  EXPECT_EQ(status->region_bytes, 0u);
}

// ClientOptions::deadline bounds every call of a client, whatever its
// per-call timeout (rdmactl --timeout bounds a whole command this way).
TEST_F(ClientTest, DeadlineBoundsEveryCall) {
  auto bounded = Client::Connect({.socket_path = daemon_->socket(),
                                  .timeout = absl::Seconds(30),
                                  .deadline = absl::Now() + absl::Seconds(2)});
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  EXPECT_TRUE((*bounded)->GetStatus().ok());
  absl::SleepFor(absl::Milliseconds(2500));
  auto late = (*bounded)->GetStatus();
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded)
      << late.status();
  // Another client of the same daemon is not affected.
  EXPECT_TRUE(client_->GetStatus().ok());
}

TEST(DaemonLifecycleTest, SigtermRemovesSocketsAndFreesEverything) {
  TempDir dir;
  auto d = DaemonProcess::Start(dir.path(), "d");
  ASSERT_TRUE(d.ok()) << d.status();
  {
    auto c = Client::Connect({.socket_path = (*d)->socket()});
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->CreateRegion("kept", 1 << 20, Access::kRead).ok());
  }
  auto status = (*d)->Stop();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
  EXPECT_FALSE(std::filesystem::exists((*d)->socket()));
  EXPECT_FALSE(std::filesystem::exists((*d)->socket() + ".session"));
  std::ifstream log((*d)->log_path());
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("released 1 daemon-owned region"));
}

TEST(DaemonLifecycleTest, SeveralDaemonsOnOneHost) {
  TempDir dir;
  auto a = DaemonProcess::Start(dir.path(), "a");
  auto b = DaemonProcess::Start(dir.path(), "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->peer_address(), (*b)->peer_address());
  // A second daemon on a live socket refuses to start and says why.
  auto clash = DaemonProcess::Start(dir.path(), "a");
  ASSERT_FALSE(clash.ok());
  EXPECT_THAT(std::string(clash.status().message()),
              HasSubstr("another process is listening"));
}

TEST(DaemonLifecycleTest, ConfigFileSetsThePinnedLimit) {
  TempDir dir;
  const std::string config = dir.path() + "/rdmad.conf";
  std::ofstream(config) << "# test config\nmax_pinned_bytes: 1048576\n";
  auto d = DaemonProcess::Start(dir.path(), "d",
                                {.extra_args = {"--config", config}});
  ASSERT_TRUE(d.ok()) << d.status();
  auto c = Client::Connect({.socket_path = (*d)->socket()});
  ASSERT_TRUE(c.ok());
  auto fits = (*c)->Allocate(512 * 1024);
  ASSERT_TRUE(fits.ok()) << fits.status();
  auto over = (*c)->Allocate(768 * 1024);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(),
              HasSubstr("over max_pinned_bytes of 1 MiB (config "
                        "max_pinned_bytes)"));
}

TEST(DaemonLifecycleTest, BadConfigNamesTheLine) {
  TempDir dir;
  const std::string config = dir.path() + "/rdmad.conf";
  std::ofstream(config) << "socket: \"/tmp/x\"\nno_such_field: 3\n";
  auto out = RunProcess({RdmadBinary(), "--config", config}, "",
                        absl::Seconds(20));
  EXPECT_NE(out.exit_code, 0);
  // FILE:LINE:COLUMN, as compilers print it (daemon/config/config_file.h).
  EXPECT_THAT(out.err, HasSubstr(config + ":2:"));
  EXPECT_THAT(out.err, HasSubstr("no_such_field"));
}

TEST(DaemonLifecycleTest, NoDaemonIsUnavailableWithAHint) {
  TempDir dir;
  auto c = Client::Connect({.socket_path = dir.path() + "/none.sock"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(c.status().message(), HasSubstr("Is rdmad running"));
  // The path as given, not the session socket beside it.
  EXPECT_THAT(c.status().message(),
              HasSubstr(absl::StrCat("rdmad at ", dir.path(), "/none.sock: ")));
}

}  // namespace
}  // namespace rdmad::testing
