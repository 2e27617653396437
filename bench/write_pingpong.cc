// write_pingpong: one-way latency of an rdmad WRITE, measured the way
// perftest's ib_write_lat measures a verbs WRITE.
//
// ib_write_lat does not wait for completions: two processes take turns
// WRITEing a message into each other's memory, each busy-polls its own
// memory for the other's message, and the tool reports half of each round
// trip. An rdmad WRITE through the queue reports its completion only when
// the bytes landed (a whole round trip), so its completion latency is not
// comparable with that figure. This program measures the comparable one.
//
// Two clients in this process, each on its own thread and its own daemon
// (A and B), each with a buffer exported for writing and a queue:
//   A: writes sequence number i into B's buffer (8 bytes at offset 0),
//      busy-polls its own buffer until i comes back;
//   B: busy-polls its buffer until i arrives, writes i into A's buffer.
// Each side drains its own completions as it polls, and fails on any that
// is not OK. One sample is half of A's round trip. The payload is the
// sequence number, so a sample is counted only once the whole 8 bytes of
// the right message landed.
//
//   write_pingpong --socket-a PATH --socket-b PATH --peer-a HOST:PORT
//                  --peer-b HOST:PORT [--iters N] [--warmup N] [--no-yield]
//                  [--json]
//
// Unlike ib_write_lat, each side calls sched_yield(2) between looks at its
// memory (--no-yield: it does not): the message is moved by the daemons'
// threads, not by a NIC, and where the machine has fewer cores than busy
// threads (two pollers, two engines, the transport's loops) a poller that
// never yields takes the core a daemon needs. In the 2-vCPU lab VM the
// p50 was 800 us with the yield and 1383 us without.
//
// --peer-a is daemon A's Peer address as B's daemon reaches it, --peer-b
// the reverse. Prints one line:
//   write_pingpong iters=N p50_us=.. p99_us=.. mean_us=.. transport=..
// (--json: the same as a JSON object). Exit status 1 with a message when
// an operation failed or a message did not arrive within 10 s.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/tool_flags.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"

namespace {

using ::rdmad::ToolFlags;
// Where a message lands in the receiver's buffer, and where the sender
// keeps the 8 bytes it sends (another cache line of its own buffer).
constexpr uint64_t kInbox = 0;
constexpr uint64_t kOutbox = 64;
constexpr uint64_t kBufferSize = 4096;
constexpr uint64_t kMessage = 8;
// A message that takes longer than this is lost, not slow.
constexpr absl::Duration kGiveUp = absl::Seconds(10);

struct Options {
  std::string socket_a;
  std::string socket_b;
  std::string peer_a;
  std::string peer_b;
  uint64_t iters = 2000;
  uint64_t warmup = 200;
  bool yield = true;
  bool json = false;
};

Options Parse(int argc, char** argv) {
  Options o;
  ToolFlags flags("write_pingpong",
                  "--socket-a PATH --socket-b PATH --peer-a HOST:PORT "
                  "--peer-b HOST:PORT [--iters N] [--warmup N] [--no-yield] "
                  "[--json]");
  flags.Text("--socket-a", &o.socket_a)
      .Text("--socket-b", &o.socket_b)
      .Text("--peer-a", &o.peer_a)
      .Text("--peer-b", &o.peer_b)
      .Number<uint64_t>("--iters", &o.iters, 1)
      .Number("--warmup", &o.warmup)
      .Switch("--no-yield", &o.yield, false)
      .Switch("--json", &o.json);
  flags.Parse(argc, argv);
  if (o.socket_a.empty() || o.socket_b.empty() || o.peer_a.empty() ||
      o.peer_b.empty()) {
    flags.Fail("--socket-a, --socket-b, --peer-a and --peer-b are required");
  }
  return o;
}

// One side: a client of its daemon, its buffer (exported for writing),
// the other side's buffer opened as a remote handle, and a queue.
struct Side {
  std::unique_ptr<rdmad::Client> client;
  std::unique_ptr<rdmad::Buffer> buffer;
  rdmad::RemoteHandle other;
  std::unique_ptr<rdmad::Queue> queue;
  std::string name;
  bool yield = true;  // sched_yield between looks at the inbox

  // The 8 bytes at `at` of this side's buffer, as the other side's WRITE
  // left them.
  uint64_t Load(uint64_t at) const {
    return std::atomic_ref<uint64_t>(
               *reinterpret_cast<uint64_t*>(buffer->data() + at))
        .load(std::memory_order_acquire);
  }
  void Store(uint64_t at, uint64_t value) {
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(buffer->data() + at))
        .store(value, std::memory_order_release);
  }
};

absl::Status Annotate(const absl::Status& s, absl::string_view what) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

absl::StatusOr<Side> OpenSide(const std::string& socket,
                              const std::string& name, bool yield) {
  Side side;
  side.name = name;
  side.yield = yield;
  auto client = rdmad::Client::Connect({.socket_path = socket});
  if (!client.ok()) return Annotate(client.status(), "connect to " + socket);
  side.client = *std::move(client);
  auto buffer = side.client->Allocate(
      kBufferSize,
      {.name = name, .export_access = rdmad::Access::kWrite});
  if (!buffer.ok()) return Annotate(buffer.status(), "allocate " + name);
  side.buffer = std::make_unique<rdmad::Buffer>(*std::move(buffer));
  std::memset(side.buffer->data(), 0, kBufferSize);
  // Wait spins as long as a round trip can take, as ib_write_lat polls.
  auto queue = side.client->OpenQueue(
      {.depth = 64, .default_timeout = kGiveUp, .spin = absl::Seconds(1)});
  if (!queue.ok()) return Annotate(queue.status(), "open a queue");
  side.queue = *std::move(queue);
  return side;
}

absl::Status OpenOther(Side& side, const std::string& peer,
                       const std::string& name) {
  auto handle = side.client->OpenRemote(
      rdmad::RemoteRegion{.peer = peer, .name = name});
  if (!handle.ok()) return Annotate(handle.status(), "open " + peer + "/" + name);
  side.other = *std::move(handle);
  return absl::OkStatus();
}

// Sends `seq` to the other side: its 8 bytes into this side's outbox, then
// a WRITE of them into the other side's inbox.
absl::Status Send(Side& side, uint64_t seq) {
  side.Store(kOutbox, seq);
  const rdmad::Op op = {.kind = rdmad::Op::Kind::kWrite,
                        .local = side.buffer.get(),
                        .local_offset = kOutbox,
                        .remote = &side.other,
                        .remote_offset = kInbox,
                        .length = kMessage,
                        .tag = seq};
  auto queued = side.queue->Submit(absl::MakeConstSpan(&op, 1));
  if (!queued.ok()) return Annotate(queued.status(), "submit");
  if (*queued != 1) return absl::ResourceExhaustedError("the queue is full");
  return absl::OkStatus();
}

// Reaps this side's completions; any that is not OK fails the run.
absl::Status Drain(Side& side) {
  rdmad::Completion done[8];
  const size_t n = side.queue->Poll(absl::MakeSpan(done));
  for (size_t i = 0; i < n; ++i) {
    if (!done[i].status.ok()) {
      return Annotate(done[i].status,
                      absl::StrCat(side.name, ": WRITE ", done[i].tag));
    }
  }
  if (n == 0 && !side.queue->status().ok()) {
    return Annotate(side.queue->status(), side.name + ": queue");
  }
  return absl::OkStatus();
}

// Busy-polls the inbox until it holds `seq`, draining completions; reads
// the clock only every few thousand looks.
absl::Status AwaitMessage(Side& side, uint64_t seq, absl::Time give_up) {
  for (uint64_t looks = 1;; ++looks) {
    if (side.Load(kInbox) == seq) return absl::OkStatus();
    if (side.yield) ::sched_yield();
    if (looks % 256 == 0) {
      if (absl::Status s = Drain(side); !s.ok()) return s;
    }
    if (looks % 4096 == 0 && absl::Now() > give_up) {
      return absl::DeadlineExceededError(absl::StrCat(
          side.name, ": message ", seq, " did not arrive within ",
          absl::FormatDuration(kGiveUp)));
    }
  }
}

// Waits until every WRITE this side submitted has completed.
absl::Status Settle(Side& side) {
  const absl::Time give_up = absl::Now() + kGiveUp;
  while (side.queue->in_flight() > 0) {
    if (absl::Status s = Drain(side); !s.ok()) return s;
    if (side.queue->in_flight() == 0) break;
    if (absl::Status s = side.queue->Wait(give_up); !s.ok()) {
      return Annotate(s, side.name + ": waiting for the last completions");
    }
  }
  return absl::OkStatus();
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "write_pingpong: %s\n", s.ToString().c_str());
  return 1;
}

double Percentile(const std::vector<double>& sorted, double p) {
  const size_t at = std::min(
      sorted.size() - 1, static_cast<size_t>(p * (sorted.size() - 1) + 0.5));
  return sorted[at];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  const std::string tag = absl::StrCat("write-pingpong-", ::getpid());
  auto a = OpenSide(o.socket_a, tag + "-a", o.yield);
  if (!a.ok()) return Fail(a.status());
  auto b = OpenSide(o.socket_b, tag + "-b", o.yield);
  if (!b.ok()) return Fail(b.status());
  if (absl::Status s = OpenOther(*a, o.peer_b, b->name); !s.ok()) return Fail(s);
  if (absl::Status s = OpenOther(*b, o.peer_a, a->name); !s.ok()) return Fail(s);

  const uint64_t total = o.warmup + o.iters;
  absl::Status b_status;
  std::thread responder([&] {
    for (uint64_t seq = 1; seq <= total; ++seq) {
      absl::Status s = AwaitMessage(*b, seq, absl::Now() + kGiveUp);
      if (s.ok()) s = Send(*b, seq);
      if (s.ok()) s = Drain(*b);
      if (!s.ok()) {
        b_status = s;
        return;
      }
    }
    b_status = Settle(*b);
  });

  std::vector<double> half_rtt_us;
  half_rtt_us.reserve(o.iters);
  absl::Status a_status;
  for (uint64_t seq = 1; seq <= total && a_status.ok(); ++seq) {
    const absl::Time start = absl::Now();
    a_status = Send(*a, seq);
    if (a_status.ok()) a_status = AwaitMessage(*a, seq, start + kGiveUp);
    if (a_status.ok() && seq > o.warmup) {
      half_rtt_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start) /
                            2);
    }
    // Outside the timed part: this side's own completion.
    if (a_status.ok()) a_status = Drain(*a);
  }
  if (a_status.ok()) a_status = Settle(*a);
  responder.join();
  if (!a_status.ok()) return Fail(a_status);
  if (!b_status.ok()) return Fail(b_status);

  std::sort(half_rtt_us.begin(), half_rtt_us.end());
  double sum = 0;
  for (double v : half_rtt_us) sum += v;
  const double p50 = Percentile(half_rtt_us, 0.50);
  const double p99 = Percentile(half_rtt_us, 0.99);
  const double mean = sum / static_cast<double>(half_rtt_us.size());
  const std::string transport(rdmad::TransportName(a->other.transport()));
  if (o.json) {
    std::printf(
        "{\"iters\": %zu, \"p50_us\": %.3f, \"p99_us\": %.3f, "
        "\"mean_us\": %.3f, \"transport\": \"%s\"}\n",
        half_rtt_us.size(), p50, p99, mean, transport.c_str());
  } else {
    std::printf(
        "write_pingpong iters=%zu p50_us=%.3f p99_us=%.3f mean_us=%.3f "
        "transport=%s\n",
        half_rtt_us.size(), p50, p99, mean, transport.c_str());
  }
  return 0;
}
