// rdmad_dmabuf_register_bench: registering GPU-style memory (a dma-buf,
// Client::RegisterDmabuf) against registering a memfd of the same size
// (Client::Register), interleaved in one run against one rdmad.
//
//   rdmad_dmabuf_register_bench --socket PATH [--size BYTES] [--reps N]
//
// The dma-buf comes from the kernel's vgem driver (modprobe vgem: the
// soft-RoCE lab VM has it); the memfd is sealed and sized, as clients make
// them. Each timing covers the registration call alone (descriptor passing,
// the daemon's checks, mapping and registration on every device, and for
// the memfd the client's own mapping of the region); buffers are made
// before and freed after it. Prints the median and the minimum of each and
// one machine-readable line:
//   dmabuf_register size=1073741824 reps=N memfd_ms=M dmabuf_ms=D
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rdmad/client.h"
#include "tests/integration/vgem_buffer.h"

namespace {

[[noreturn]] void Die(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "rdmad_dmabuf_register_bench: %s: %s\n", what.c_str(),
               status.ToString().c_str());
  std::exit(1);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Min(const std::vector<double>& v) {
  return *std::min_element(v.begin(), v.end());
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket;
  uint64_t size = 1ULL << 30;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--socket") {
      socket = value;
    } else if (flag == "--size" && absl::SimpleAtoi(value, &size) && size > 0) {
    } else if (flag == "--reps" && absl::SimpleAtoi(value, &reps) && reps > 0) {
    } else {
      std::fprintf(stderr,
                   "usage: %s --socket PATH [--size BYTES] [--reps N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (socket.empty()) {
    std::fprintf(stderr, "%s: --socket is required\n", argv[0]);
    return 2;
  }
  auto client = rdmad::Client::Connect({.socket_path = socket});
  if (!client.ok()) Die("connect", client.status());

  std::vector<double> memfd_ms, dmabuf_ms;
  for (int i = 0; i < reps; ++i) {
    const int memfd =
        ::memfd_create("rdmad-bench", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (memfd < 0 || ::ftruncate(memfd, static_cast<off_t>(size)) != 0) {
      Die("memfd", absl::ErrnoToStatus(errno, "memfd_create/ftruncate"));
    }
    absl::Time start = absl::Now();
    {
      auto buffer = (*client)->Register(memfd, size);
      if (!buffer.ok()) Die("Register", buffer.status());
      memfd_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    }  // freed here, outside the timing
    ::close(memfd);

    auto gpu = rdmad::testing::VgemBuffer::Create(size);
    if (!gpu.ok()) Die("vgem buffer", gpu.status());
    start = absl::Now();
    {
      auto buffer = (*client)->RegisterDmabuf(gpu->fd(), 0, size);
      if (!buffer.ok()) Die("RegisterDmabuf", buffer.status());
      dmabuf_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    }
  }
  auto status = (*client)->GetStatus();
  if (!status.ok()) Die("GetStatus", status.status());
  std::printf("transport %s, %llu bytes, %d repetitions\n",
              std::string(rdmad::TransportName(status->transport)).c_str(),
              static_cast<unsigned long long>(size), reps);
  std::printf("  Register (memfd)         median %8.3f ms  min %8.3f ms\n",
              Median(memfd_ms), Min(memfd_ms));
  std::printf("  RegisterDmabuf (dma-buf) median %8.3f ms  min %8.3f ms\n",
              Median(dmabuf_ms), Min(dmabuf_ms));
  std::printf(
      "dmabuf_register size=%llu reps=%d memfd_ms=%.3f dmabuf_ms=%.3f\n",
      static_cast<unsigned long long>(size), reps, Median(memfd_ms),
      Median(dmabuf_ms));
  return 0;
}
