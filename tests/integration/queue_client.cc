// A client process for the queue tests: opens a session and a queue on the
// daemon at SOCKET and works on [OFFSET, OFFSET+SIZE) of region REMOTE
// (a region address), in batches of 16 operations of 4 KiB:
//   verify: writes a pattern made from SEED, reads it back into another
//           buffer, and exits 0 only if every byte matches;
//   hang:   submits as many WRITEs as the queue holds, prints "submitted",
//           and waits to be killed with them in flight;
//   immediates: writes the pattern with an immediate on each WRITE (its
//           index: 0, 1, ...), and exits 0 only if every WRITE succeeded.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "rdmad/client.h"
#include "rdmad/queue.h"

namespace {

constexpr uint64_t kOp = 4096;

void Fill(char* p, uint64_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<char>(x);
  }
}

int Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

// Submits `ops` and waits for all of them; the first failure's status.
absl::Status RunAll(rdmad::Queue& queue, std::vector<rdmad::Op>& ops) {
  size_t submitted = 0, done = 0;
  rdmad::Completion c[64];
  while (done < ops.size()) {
    if (submitted < ops.size()) {
      auto n = queue.Submit(absl::MakeSpan(ops).subspan(submitted));
      if (!n.ok() && !absl::IsResourceExhausted(n.status())) return n.status();
      if (n.ok()) submitted += *n;
    }
    size_t got = queue.Poll(absl::MakeSpan(c));
    if (got == 0) {
      if (auto s = queue.Wait(absl::Now() + absl::Seconds(60)); !s.ok()) {
        return s;
      }
      got = queue.Poll(absl::MakeSpan(c));
    }
    for (size_t i = 0; i < got; ++i) {
      if (!c[i].status.ok()) return c[i].status;
    }
    done += got;
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(
        stderr,
        "usage: %s SOCKET REMOTE OFFSET SIZE SEED verify|hang|immediates\n",
        argv[0]);
    return 2;
  }
  const uint64_t offset = std::strtoull(argv[3], nullptr, 10);
  const uint64_t size = std::strtoull(argv[4], nullptr, 10);
  const uint64_t seed = std::strtoull(argv[5], nullptr, 10);
  const std::string mode = argv[6];
  auto client = rdmad::Client::Connect({.socket_path = argv[1]});
  if (!client.ok()) return Fail("connect", client.status());
  auto remote_address = rdmad::RemoteRegion::Parse(argv[2]);
  if (!remote_address.ok()) return Fail("parse", remote_address.status());
  auto remote = (*client)->OpenRemote(*remote_address);
  if (!remote.ok()) return Fail("open remote", remote.status());
  auto queue = (*client)->OpenQueue({.depth = 64});
  if (!queue.ok()) return Fail("open queue", queue.status());
  auto out = (*client)->Allocate(size);
  auto in = (*client)->Allocate(size);
  if (!out.ok() || !in.ok()) return Fail("allocate", out.status());
  Fill(out->data(), size, seed);
  std::memset(in->data(), 0, size);
  std::vector<rdmad::Op> writes, reads;
  for (uint64_t at = 0; at < size; at += kOp) {
    const uint64_t n = std::min(kOp, size - at);
    writes.push_back({.kind = rdmad::Op::Kind::kWrite, .local = &*out,
                      .local_offset = at, .remote = &*remote,
                      .remote_offset = offset + at, .length = n,
                      .tag = at});
    reads.push_back({.kind = rdmad::Op::Kind::kRead, .local = &*in,
                     .local_offset = at, .remote = &*remote,
                     .remote_offset = offset + at, .length = n, .tag = at});
  }
  if (mode == "immediates") {
    for (uint32_t i = 0; i < writes.size(); ++i) writes[i].immediate = i;
    if (auto s = RunAll(**queue, writes); !s.ok()) return Fail("write", s);
    std::printf("wrote %zu\n", writes.size());
    return 0;
  }
  if (mode == "hang") {
    auto n = (*queue)->Submit(writes);
    if (!n.ok()) return Fail("submit", n.status());
    std::printf("submitted %zu\n", *n);
    std::fflush(stdout);
    for (int i = 0; i < 600; ++i) ::sleep(1);
    return 0;
  }
  if (auto s = RunAll(**queue, writes); !s.ok()) return Fail("write", s);
  if (auto s = RunAll(**queue, reads); !s.ok()) return Fail("read", s);
  if (std::memcmp(out->data(), in->data(), size) != 0) {
    std::fprintf(stderr, "read back different bytes\n");
    return 1;
  }
  std::printf("verified %llu bytes\n", static_cast<unsigned long long>(size));
  return 0;
}
