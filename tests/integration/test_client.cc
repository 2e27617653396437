// A client process for tests: opens a session on the daemon at argv[1],
// allocates a buffer of argv[2] bytes, prints "ready <region id>" and waits
// to be killed. Tests SIGKILL it and check the daemon freed the buffer.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rdmad/client.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SOCKET SIZE\n", argv[0]);
    return 2;
  }
  auto client = rdmad::Client::Connect({.socket_path = argv[1]});
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  auto buffer = (*client)->Allocate(std::strtoull(argv[2], nullptr, 10));
  if (!buffer.ok()) {
    std::fprintf(stderr, "%s\n", buffer.status().ToString().c_str());
    return 1;
  }
  std::memset(buffer->data(), 0x5a, buffer->size());
  std::printf("ready %llu\n", static_cast<unsigned long long>(buffer->id()));
  std::fflush(stdout);
  // Bounded: a test that forgets us must not leave us running forever.
  for (int i = 0; i < 600; ++i) ::sleep(1);
  return 0;
}
