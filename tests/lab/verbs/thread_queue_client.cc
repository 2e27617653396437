// thread_queue_client: many threads, one queue each, against a region on
// another host through the client library (two_vm_queue.sh runs two at
// once).
//
//   thread_queue_client SOCKET PEER/REGION SLOT THREADS verbs|tcp
//       opens PEER/REGION once for the process; each of THREADS threads
//       opens its own queue and buffers, writes kBlocks blocks of its own
//       pattern into its slice of the region (slice SLOT * THREADS + t, of
//       kSlice bytes; blocks of unaligned sizes at unaligned offsets) in
//       batches, reads the slice back into another buffer and compares.
//       Every operation must complete OK over that transport.
// Exit status 0 when all of it held; 1 with a message otherwise.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"

namespace {

constexpr uint64_t kBlock = 3001;  // odd: every block starts unaligned
constexpr uint64_t kBlocks = 32;
constexpr uint64_t kSlice = kBlock * kBlocks;
constexpr absl::Duration kWait = absl::Seconds(120);

// The byte at `at` of thread `writer`'s pattern (writer = its slice).
char PatternAt(uint64_t writer, uint64_t at) {
  return static_cast<char>((at * 131 + writer * 29 + 7) & 0xff);
}

// Runs `ops` through `queue` (Queue::Run) and checks that each went over
// `want`.
absl::Status RunAll(rdmad::Queue& queue, const std::vector<rdmad::Op>& ops,
                    rdmad::Transport want) {
  auto done = queue.Run(ops, absl::Now() + kWait);
  if (!done.ok()) return done.status();
  for (const rdmad::Completion& c : *done) {
    if (c.transport != want) {
      return absl::InternalError(
          absl::StrCat("operation ", c.tag, " went over another transport"));
    }
  }
  return absl::OkStatus();
}

// One thread's work: its slice written, read back and compared.
absl::Status WriteAndReadBack(rdmad::Client& client,
                              const rdmad::RemoteHandle& remote,
                              uint64_t slice, rdmad::Transport want) {
  auto queue = client.OpenQueue({.depth = 16, .default_timeout = kWait});
  if (!queue.ok()) return queue.status();
  auto out = client.Allocate(kSlice);
  if (!out.ok()) return out.status();
  auto in = client.Allocate(kSlice);
  if (!in.ok()) return in.status();
  for (uint64_t at = 0; at < kSlice; ++at) {
    out->data()[at] = PatternAt(slice, at);
    in->data()[at] = 0;
  }
  std::vector<rdmad::Op> writes;
  std::vector<rdmad::Op> reads;
  for (uint64_t i = 0; i < kBlocks; ++i) {
    rdmad::Op op = {.kind = rdmad::Op::Kind::kWrite,
                    .local = &*out,
                    .local_offset = i * kBlock,
                    .remote = &remote,
                    .remote_offset = slice * kSlice + i * kBlock,
                    .length = kBlock,
                    .tag = i};
    writes.push_back(op);
    op.kind = rdmad::Op::Kind::kRead;
    op.local = &*in;
    reads.push_back(op);
  }
  if (absl::Status s = RunAll(**queue, writes, want); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("writing: ", s.message()));
  }
  if (absl::Status s = RunAll(**queue, reads, want); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("reading back: ", s.message()));
  }
  for (uint64_t at = 0; at < kSlice; ++at) {
    if (in->data()[at] != PatternAt(slice, at)) {
      return absl::DataLossError(
          absl::StrCat("byte ", at, " of slice ", slice, " read back differs"));
    }
  }
  return absl::OkStatus();
}

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "thread_queue_client: %s: %s\n", what.c_str(),
               status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string transport = argc == 6 ? argv[5] : "";
  if (transport != "verbs" && transport != "tcp") {
    std::fprintf(stderr,
                 "usage: %s SOCKET PEER/REGION SLOT THREADS verbs|tcp\n",
                 argv[0]);
    return 2;
  }
  const uint64_t slot = std::strtoull(argv[3], nullptr, 10);
  const uint64_t threads = std::strtoull(argv[4], nullptr, 10);
  if (threads == 0 || threads > 64 || slot > 64) {
    std::fprintf(stderr,
                 "thread_queue_client: SLOT must be 0..64, THREADS 1..64\n");
    return 2;
  }
  const rdmad::Transport want = transport == "verbs" ? rdmad::Transport::kVerbs
                                                     : rdmad::Transport::kTcp;
  auto client = rdmad::Client::Connect({.socket_path = argv[1]});
  if (!client.ok()) return Fail("connect", client.status());
  const std::string address = argv[2];
  auto parsed = rdmad::RemoteRegion::Parse(address);
  if (!parsed.ok()) return Fail("parse " + address, parsed.status());
  auto remote = (*client)->OpenRemote(*parsed);
  if (!remote.ok()) return Fail("open remote " + address, remote.status());
  if (remote->size() < (slot + 1) * threads * kSlice) {
    return Fail("open remote",
                absl::OutOfRangeError(absl::StrCat(
                    "the region has ", remote->size(), " bytes; slot ", slot,
                    " needs ", (slot + 1) * threads * kSlice)));
  }
  const absl::Time start = absl::Now();
  absl::Mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> workers;
  for (uint64_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const uint64_t slice = slot * threads + t;
      absl::Status s = WriteAndReadBack(**client, *remote, slice, want);
      if (!s.ok()) {
        absl::MutexLock lock(&mu);
        failures.push_back(absl::StrCat("thread ", t, ": ", s.ToString()));
      }
    });
  }
  for (std::thread& w : workers) w.join();
  for (const std::string& f : failures) {
    std::fprintf(stderr, "thread_queue_client: %s\n", f.c_str());
  }
  if (!failures.empty()) return 1;
  std::printf("thread_queue_client: slot %llu: %llu threads wrote and read "
              "back %llu bytes each, byte-identical, in %s\n",
              static_cast<unsigned long long>(slot),
              static_cast<unsigned long long>(threads),
              static_cast<unsigned long long>(kSlice),
              absl::FormatDuration(absl::Now() - start).c_str());
  return 0;
}
