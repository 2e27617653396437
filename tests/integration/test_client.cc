// A client process for tests: opens a session on the daemon at argv[1],
// allocates a buffer of argv[2] bytes (with a third argument "dmabuf":
// registers a vgem dma-buf of that size instead, tests/integration/
// vgem_buffer.h), prints "ready <region id>" and waits to be killed. Tests
// SIGKILL it and check the daemon freed the buffer.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rdmad/client.h"
#include "tests/integration/vgem_buffer.h"

int main(int argc, char** argv) {
  const bool dmabuf = argc == 4 && std::strcmp(argv[3], "dmabuf") == 0;
  if (argc != 3 && !dmabuf) {
    std::fprintf(stderr, "usage: %s SOCKET SIZE [dmabuf]\n", argv[0]);
    return 2;
  }
  auto client = rdmad::Client::Connect({.socket_path = argv[1]});
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  const uint64_t size = std::strtoull(argv[2], nullptr, 10);
  absl::StatusOr<rdmad::testing::VgemBuffer> gpu =
      absl::FailedPreconditionError("not asked for");
  if (dmabuf) {
    gpu = rdmad::testing::VgemBuffer::Create(size);
    if (!gpu.ok()) {
      std::fprintf(stderr, "%s\n", gpu.status().ToString().c_str());
      return 1;
    }
  }
  auto buffer = dmabuf ? (*client)->RegisterDmabuf(gpu->fd(), 0, gpu->size())
                       : (*client)->Allocate(size);
  if (!buffer.ok()) {
    std::fprintf(stderr, "%s\n", buffer.status().ToString().c_str());
    return 1;
  }
  if (!dmabuf) std::memset(buffer->data(), 0x5a, buffer->size());
  std::printf("ready %llu\n", static_cast<unsigned long long>(buffer->id()));
  std::fflush(stdout);
  // Bounded: a test that forgets us must not leave us running forever.
  for (int i = 0; i < 600; ++i) ::sleep(1);
  return 0;
}
