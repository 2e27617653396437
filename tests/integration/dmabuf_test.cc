// Client::RegisterDmabuf end to end against real daemons.
//
// DmabufDescriptorTest runs anywhere: descriptors that are not dma-bufs
// (a regular file, a socket, a closed descriptor) get INVALID_ARGUMENT
// saying what they are, and the daemon keeps none of them.
//
// The Vgem* tests need real dma-bufs: the kernel's vgem driver makes them
// (tests/integration/vgem_buffer.h), which Debian's kernel ships as a
// module but this project's CI host kernel lacks, so they run in the
// soft-RoCE lab VM (tests/lab/verbs/CMakeLists.txt loads vgem there):
//   - VgemTcpTest: on the TCP transport a dma-buf region is served like a
//     memfd one: another daemon WRITEs and READs it byte for byte, and it
//     is the source and sink of this daemon's own transfers; a range
//     outside the dma-buf is INVALID_ARGUMENT; the daemon holds the
//     descriptor while the region lives and closes it after a free and
//     after its client is SIGKILLed.
//   - VgemVerbsTest: on rxe (no dma-buf support) registration fails with
//     FAILED_PRECONDITION naming rxe0, its driver and EOPNOTSUPP, and
//     leaves no region, no pinned byte and no descriptor behind; rdmactl
//     devices and status say the same.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/vgem_buffer.h"
#include "tests/json_reader.h"

namespace rdmad::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// How many dma-bufs `pid` holds open; -1 if it is gone.
int DmabufFds(pid_t pid) {
  auto targets = FdTargets(pid);
  if (!targets) return -1;
  int n = 0;
  for (const std::string& target : *targets) {
    n += absl::StartsWith(target, "/dmabuf:") ||
         absl::StartsWith(target, "anon_inode:dmabuf");
  }
  return n;
}

// Polls `done` every 10 ms for at most `timeout`.
template <typename Predicate>
bool Eventually(Predicate done, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

DaemonOptions On(const std::string& transport) {
  DaemonOptions options;
  options.transport = transport;
  return options;
}

// ---------------------------------------------------------------------------
// Descriptors that are not dma-bufs (any host)

class DmabufDescriptorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = DaemonProcess::Start(dir_.path(), "a");
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    client_ = Connect(*daemon_);
    ASSERT_NE(client_, nullptr);
  }

  // The registration of `fd` fails INVALID_ARGUMENT with `fragment`, no
  // region is made, and the daemon holds no descriptor of what `fd` refers
  // to (its /proc link: the file's path, "socket:[INODE]"). The daemon's
  // descriptor count is no measure: it has transient ones of its own.
  void ExpectRefused(int fd, const std::string& fragment) {
    char link[256] = {};
    const std::string self = absl::StrCat("/proc/self/fd/", fd);
    const ssize_t n = ::readlink(self.c_str(), link, sizeof(link) - 1);
    auto buffer = client_->RegisterDmabuf(fd, 0, 4096);
    ASSERT_FALSE(buffer.ok());
    EXPECT_EQ(buffer.status().code(), absl::StatusCode::kInvalidArgument)
        << buffer.status();
    EXPECT_THAT(std::string(buffer.status().message()), HasSubstr(fragment));
    auto regions = client_->ListRegions();
    ASSERT_TRUE(regions.ok());
    EXPECT_TRUE(regions->empty());
    if (n <= 0) return;  // not open: nothing could be passed
    auto held = FdTargets(daemon_->pid());
    ASSERT_TRUE(held.has_value());
    EXPECT_THAT(*held, Not(Contains(std::string(link, n))))
        << "the daemon kept the refused descriptor";
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(DmabufDescriptorTest, ARegularFileIsNotADmabuf) {
  const std::string path = dir_.path() + "/not-gpu-memory";
  std::ofstream(path) << std::string(8192, 'x');
  UniqueFd file(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(file);
  ExpectRefused(file.get(), "not a dma-buf: it is a regular file (" + path);
}

TEST_F(DmabufDescriptorTest, ASocketIsNotADmabuf) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd a(pair[0]), b(pair[1]);
  ExpectRefused(a.get(), "not a dma-buf: it is a socket");
}

TEST_F(DmabufDescriptorTest, AClosedDescriptorIsRefusedBeforeItIsSent) {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ExpectRefused(fd, absl::StrCat("descriptor ", fd, " is not open"));
}

// ---------------------------------------------------------------------------
// vgem dma-bufs on the TCP transport (lab VM)

constexpr uint64_t kBufferBytes = 1 << 20;

void Fill(char* data, uint64_t length, uint8_t seed) {
  for (uint64_t i = 0; i < length; ++i) {
    data[i] = static_cast<char>(seed + i * 7 + (i >> 11));
  }
}

class VgemTcpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = DaemonProcess::Start(dir_.path(), "a", On("tcp"));
    ASSERT_TRUE(a.ok()) << a.status();
    a_ = *std::move(a);
    auto b = DaemonProcess::Start(dir_.path(), "b", On("tcp"));
    ASSERT_TRUE(b.ok()) << b.status();
    b_ = *std::move(b);
    ca_ = Connect(*a_);
    cb_ = Connect(*b_);
    ASSERT_NE(ca_, nullptr);
    ASSERT_NE(cb_, nullptr);
    auto gpu = VgemBuffer::Create(kBufferBytes);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = std::make_unique<VgemBuffer>(*std::move(gpu));
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> a_, b_;
  std::unique_ptr<Client> ca_, cb_;
  std::unique_ptr<VgemBuffer> gpu_;
};

TEST_F(VgemTcpTest, AnotherDaemonWritesAndReadsItByteForByte) {
  auto region =
      ca_->RegisterDmabuf(gpu_->fd(), 0, gpu_->size(),
                          {.name = "gpu", .export_access = Access::kReadWrite});
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ(region->data(), nullptr);
  EXPECT_EQ(region->size(), gpu_->size());
  auto listed = ca_->ListRegions();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].backing, "dmabuf");
  EXPECT_EQ((*listed)[0].name, "gpu");

  // B WRITEs into the dma-buf: the bytes are in the GPU memory.
  auto b_buffer = cb_->Allocate(gpu_->size());
  ASSERT_TRUE(b_buffer.ok()) << b_buffer.status();
  Fill(b_buffer->data(), b_buffer->size(), 1);
  auto wrote = cb_->Write(*b_buffer, 0, Remote(*a_, "gpu"), 0, gpu_->size());
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_EQ(std::memcmp(gpu_->data(), b_buffer->data(), gpu_->size()), 0);

  // What the GPU memory holds is what B READs.
  Fill(gpu_->data(), gpu_->size(), 2);
  std::memset(b_buffer->data(), 0, b_buffer->size());
  auto read = cb_->Read(*b_buffer, 0, Remote(*a_, "gpu"), 0, gpu_->size());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(std::memcmp(gpu_->data(), b_buffer->data(), gpu_->size()), 0);

  // rdmactl shows the backing.
  const ProcessResult regions =
      RunProcess({RdmactlBinary(), "--socket", a_->socket(), "regions"});
  EXPECT_EQ(regions.exit_code, 0) << regions.err;
  EXPECT_THAT(regions.out, HasSubstr("dmabuf"));
}

TEST_F(VgemTcpTest, ARangeAtAnOffsetIsTheSourceAndSinkOfTransfers) {
  // An offset that is not page-aligned: the daemon maps from the page
  // below and the region starts at the byte asked for.
  constexpr uint64_t kOffset = 4096 + 100;
  constexpr uint64_t kLength = 20000;
  Fill(gpu_->data(), gpu_->size(), 3);
  auto region = ca_->RegisterDmabuf(gpu_->fd(), kOffset, kLength);
  ASSERT_TRUE(region.ok()) << region.status();
  auto dst = cb_->CreateRegion("dst", kLength, Access::kReadWrite);
  ASSERT_TRUE(dst.ok()) << dst.status();

  auto wrote = ca_->Write(*region, 0, Remote(*b_, "dst"), 0, kLength);
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  auto view = cb_->MapRegion("dst");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(std::memcmp(view->data(), gpu_->data() + kOffset, kLength), 0);

  Fill(view->data(), kLength, 4);
  auto read = ca_->Read(*region, 10, Remote(*b_, "dst"), 10, kLength - 10);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(
      std::memcmp(gpu_->data() + kOffset + 10, view->data() + 10, kLength - 10),
      0);
  // The bytes around the range are untouched.
  std::vector<char> before(gpu_->data(), gpu_->data() + kOffset);
  Fill(before.data(), before.size(), 3);
  EXPECT_EQ(std::memcmp(before.data(), gpu_->data(), kOffset), 0);
}

TEST_F(VgemTcpTest, ARangeOutsideTheDmabufIsInvalid) {
  const uint64_t size = gpu_->size();
  struct Case {
    uint64_t offset, length;
  };
  for (const Case c : {Case{size, 1}, Case{4096, size}, Case{0, size + 1},
                       Case{~0ULL - 10, 4096}}) {
    SCOPED_TRACE(absl::StrCat("offset ", c.offset, " length ", c.length));
    auto region = ca_->RegisterDmabuf(gpu_->fd(), c.offset, c.length);
    ASSERT_FALSE(region.ok());
    EXPECT_EQ(region.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(region.status().message()),
                HasSubstr("outside the dma-buf"));
    EXPECT_THAT(std::string(region.status().message()),
                HasSubstr(absl::StrCat("holds ", size, " bytes")));
  }
  auto empty = ca_->RegisterDmabuf(gpu_->fd(), 0, 0);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DmabufFds(a_->pid()), 0);
}

TEST_F(VgemTcpTest, TheDaemonHoldsTheDescriptorUntilTheRegionIsFreed) {
  ASSERT_EQ(DmabufFds(a_->pid()), 0);
  auto region = ca_->RegisterDmabuf(gpu_->fd(), 0, gpu_->size());
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ(DmabufFds(a_->pid()), 1);
  ASSERT_TRUE(region->Release().ok());
  EXPECT_TRUE(Eventually([&] { return DmabufFds(a_->pid()) == 0; }))
      << "the daemon still holds " << DmabufFds(a_->pid()) << " dma-buf(s)";
}

TEST_F(VgemTcpTest, TheDaemonClosesTheDescriptorOfAKilledClient) {
  const std::string log = dir_.path() + "/client.log";
  auto child = ChildProcess::Spawn(
      {TEST_CLIENT_PATH, a_->socket(), "65536", "dmabuf"}, log);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(
      Eventually([&] { return DmabufFds(a_->pid()) == 1; }, absl::Seconds(30)))
      << "the client never registered its dma-buf";
  (*child)->Signal(SIGKILL);
  ASSERT_TRUE((*child)->Wait(absl::Seconds(10)).ok());
  EXPECT_TRUE(Eventually([&] { return DmabufFds(a_->pid()) == 0; }))
      << "the daemon still holds the killed client's dma-buf";
  auto regions = ca_->ListRegions();
  ASSERT_TRUE(regions.ok());
  EXPECT_TRUE(regions->empty());
}

// ---------------------------------------------------------------------------
// vgem dma-bufs on soft-RoCE (lab VM): rxe has no ibv_reg_dmabuf_mr

TEST(VgemVerbsTest, WithoutDmabufSupportNothingIsLeftBehind) {
  TempDir dir;
  auto a = DaemonProcess::Start(dir.path(), "a", On("verbs"));
  ASSERT_TRUE(a.ok()) << a.status();
  auto client = Connect(**a);
  ASSERT_NE(client, nullptr);
  auto gpu = VgemBuffer::Create(kBufferBytes);
  ASSERT_TRUE(gpu.ok()) << gpu.status();

  auto region =
      client->RegisterDmabuf(gpu->fd(), 0, gpu->size(), {.name = "gpu"});
  ASSERT_FALSE(region.ok());
  EXPECT_EQ(region.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(region.status().message()),
              StartsWith("no device supports dma-buf: rxe0 (driver rxe): "
                         "ibv_reg_dmabuf_mr: Operation not supported "
                         "(EOPNOTSUPP)"));
  EXPECT_THAT(std::string(region.status().message()), HasSubstr("(mlx5, efa)"));
  EXPECT_THAT(std::string(region.status().message()),
              HasSubstr("--transport tcp, whose transport serves a dma-buf "
                        "the CPU can map (this one can)"));

  EXPECT_EQ(DmabufFds((*a)->pid()), 0);
  auto status = client->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->region_count, 0u);
  EXPECT_EQ(status->pinned_bytes, 0u);
  EXPECT_TRUE(status->dmabuf_devices.empty());
  // The name is free again.
  auto named = client->Allocate(4096, {.name = "gpu"});
  EXPECT_TRUE(named.ok()) << named.status();

  const ProcessResult devices =
      RunProcess({RdmactlBinary(), "--socket", (*a)->socket(), "devices"});
  EXPECT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_THAT(devices.out, HasSubstr("driver rxe"));
  EXPECT_THAT(devices.out,
              HasSubstr("dma-buf: no (ibv_reg_dmabuf_mr: Operation not "
                        "supported (EOPNOTSUPP))"));
  const ProcessResult json = RunProcess(
      {RdmactlBinary(), "--socket", (*a)->socket(), "status", "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  auto parsed = JsonValue::Parse(json.out);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << json.out;
  EXPECT_TRUE((*parsed)["dmabuf_devices"].is_array()) << json.out;
  EXPECT_TRUE((*parsed)["dmabuf_devices"].array().empty()) << json.out;
}

}  // namespace
}  // namespace rdmad::testing
