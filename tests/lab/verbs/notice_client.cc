// notice_client: both ends of a WRITE with an immediate between two lab VMs
// (two_vm_queue.sh), through the client library and shared-memory queues.
//
//   notice_client wait SOCKET REGION COUNT READY_FILE [BLOCK]
//       creates the named region REGION (exported read-write), opens a
//       notification queue, creates READY_FILE, and waits (bounded) for
//       COUNT notifications: immediates 1..COUNT, each exactly once, for
//       [BLOCK * (immediate - 1), +BLOCK) of REGION, every byte of which is
//       already the sender's pattern when the notification arrives.
//   notice_client send SOCKET PEER/REGION COUNT verbs|tcp [BLOCK]
//       writes COUNT blocks of BLOCK bytes to that region, block i with
//       immediate i + 1, through one queue; every one must complete OK over
//       that transport.
// BLOCK defaults to 64 bytes; blocks of several MiB are split over the
// rails of a verbs peer, and their notification must still follow the last
// byte of every rail.
// Exit status 0 when all of it held; 1 with a message otherwise.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"

namespace {

constexpr absl::Duration kWait = absl::Seconds(120);
uint64_t block_bytes = 64;  // the BLOCK argument

// The byte at `at` of the sender's pattern.
char PatternAt(uint64_t at) { return static_cast<char>((at * 131 + 7) & 0xff); }

int Fail(const std::string& what) {
  std::fprintf(stderr, "notice_client: %s\n", what.c_str());
  return 1;
}

int Fail(const std::string& what, const absl::Status& status) {
  return Fail(what + ": " + status.ToString());
}

int Wait(rdmad::Client& client, const std::string& name, uint64_t count,
         const std::string& ready_file) {
  auto region = client.CreateRegion(name, count * block_bytes, rdmad::Access::kReadWrite);
  if (!region.ok()) return Fail("create region", region.status());
  auto notes = client.OpenQueue({.notifications = true});
  if (!notes.ok()) return Fail("open notification queue", notes.status());
  auto view = client.MapRegion(name);
  if (!view.ok()) return Fail("map region", view.status());
  std::ofstream(ready_file).put('\n');
  std::vector<bool> seen(count, false);
  uint64_t received = 0;
  const absl::Time end = absl::Now() + kWait;
  rdmad::Completion got[16];
  while (received < count) {
    if (absl::Status s = (*notes)->Wait(end); !s.ok()) {
      return Fail("waiting for notification " + std::to_string(received + 1) +
                      " of " + std::to_string(count),
                  s);
    }
    const size_t n = (*notes)->Poll(absl::MakeSpan(got));
    for (size_t i = 0; i < n; ++i) {
      const rdmad::Completion& c = got[i];
      if (c.kind != rdmad::Completion::Kind::kNotification) {
        return Fail("a completion that is not a notification");
      }
      if (c.immediate == 0 || c.immediate > count || seen[c.immediate - 1]) {
        return Fail("unexpected or repeated immediate " +
                    std::to_string(c.immediate));
      }
      seen[c.immediate - 1] = true;
      const uint64_t offset = (c.immediate - 1) * block_bytes;
      if (c.region != region->id || c.offset != offset || c.bytes != block_bytes) {
        return Fail("notification " + std::to_string(c.immediate) +
                    " names region " + std::to_string(c.region) + " [" +
                    std::to_string(c.offset) + ", +" + std::to_string(c.bytes) +
                    ")");
      }
      for (uint64_t b = 0; b < block_bytes; ++b) {
        if (view->data()[offset + b] != PatternAt(offset + b)) {
          return Fail("notification " + std::to_string(c.immediate) +
                      " arrived before its data");
        }
      }
      ++received;
    }
  }
  std::printf("notice_client: received %llu notifications, data in place\n",
              static_cast<unsigned long long>(received));
  return 0;
}

int Send(rdmad::Client& client, const std::string& address, uint64_t count,
         rdmad::Transport want) {
  auto parsed = rdmad::RemoteRegion::Parse(address);
  if (!parsed.ok()) return Fail("parse " + address, parsed.status());
  auto remote = client.OpenRemote(*parsed);
  if (!remote.ok()) return Fail("open remote " + address, remote.status());
  auto queue = client.OpenQueue({.depth = 64, .default_timeout = kWait});
  if (!queue.ok()) return Fail("open queue", queue.status());
  auto buf = client.Allocate(count * block_bytes);
  if (!buf.ok()) return Fail("allocate", buf.status());
  for (uint64_t at = 0; at < count * block_bytes; ++at) buf->data()[at] = PatternAt(at);
  std::vector<rdmad::Op> ops;
  for (uint64_t i = 0; i < count; ++i) {
    ops.push_back({.kind = rdmad::Op::Kind::kWrite,
                   .local = &*buf,
                   .local_offset = i * block_bytes,
                   .remote = &*remote,
                   .remote_offset = i * block_bytes,
                   .length = block_bytes,
                   .tag = i,
                   .immediate = static_cast<uint32_t>(i + 1)});
  }
  const absl::Time start = absl::Now();
  const absl::Time end = start + kWait;
  size_t submitted = 0;
  uint64_t completed = 0;
  rdmad::Completion got[32];
  while (completed < count) {
    if (submitted < ops.size()) {
      auto n = (*queue)->Submit(absl::MakeSpan(ops).subspan(submitted));
      // RESOURCE_EXHAUSTED: as many in flight as the queue takes.
      if (!n.ok() && !absl::IsResourceExhausted(n.status())) {
        return Fail("submit", n.status());
      }
      if (n.ok()) submitted += *n;
    }
    size_t n = (*queue)->Poll(absl::MakeSpan(got));
    if (n == 0) {
      if (absl::Status s = (*queue)->Wait(end); !s.ok()) {
        return Fail("waiting for completions", s);
      }
      n = (*queue)->Poll(absl::MakeSpan(got));
    }
    for (size_t i = 0; i < n; ++i) {
      if (!got[i].status.ok()) {
        return Fail("WRITE " + std::to_string(got[i].tag), got[i].status);
      }
      if (got[i].transport != want) {
        return Fail("WRITE " + std::to_string(got[i].tag) +
                    " went over another transport");
      }
    }
    completed += n;
  }
  std::printf("notice_client: %llu WRITEs with an immediate in %s\n",
              static_cast<unsigned long long>(count),
              absl::FormatDuration(absl::Now() - start).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::string transport =
      mode == "send" && (argc == 6 || argc == 7) ? argv[5] : "";
  if (!((mode == "wait" && (argc == 6 || argc == 7)) ||
        (mode == "send" && (transport == "verbs" || transport == "tcp")))) {
    std::fprintf(stderr,
                 "usage: %s wait SOCKET REGION COUNT READY_FILE [BLOCK]\n"
                 "       %s send SOCKET PEER/REGION COUNT verbs|tcp [BLOCK]\n",
                 argv[0], argv[0]);
    return 2;
  }
  const uint64_t count = std::strtoull(argv[4], nullptr, 10);
  if (count == 0 || count > 100000) return Fail("COUNT must be 1..100000");
  if (argc == 7) {
    block_bytes = std::strtoull(argv[6], nullptr, 10);
    if (block_bytes == 0 || block_bytes > (64u << 20)) {
      return Fail("BLOCK must be 1..67108864 bytes");
    }
  }
  auto client = rdmad::Client::Connect({.socket_path = argv[2]});
  if (!client.ok()) return Fail("connect", client.status());
  return mode == "wait" ? Wait(**client, argv[3], count, argv[5])
                        : Send(**client, argv[3], count,
                               transport == "verbs" ? rdmad::Transport::kVerbs
                                                    : rdmad::Transport::kTcp);
}
