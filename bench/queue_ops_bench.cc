// queue_ops_bench: the C++ side of bench/python_ops.py. The same three
// loops the Python package runs there, on an rdmad::Queue, so that each
// Python figure has its C++ reference from the same run:
//
//   submit     batches of --batch 8-byte WRITEs: the time inside
//              Queue::Submit per operation (each batch's completions are
//              waited for and polled outside the timed part);
//   latency    one 8-byte WRITE at a time: Submit, Wait, Poll; p50, p99;
//   bandwidth  --size WRITEs, --qd in flight, for --seconds: bytes/s.
//
//   queue_ops_bench --socket PATH --target ADDRESS --mode MODE
//                   [--iters N] [--batch N] [--size BYTES] [--qd N]
//                   [--seconds S]
//
// ADDRESS is "[PEER/]NAME" of a region of at least max(--batch * 8,
// --size * --qd) bytes that may be written. Prints one JSON object; exit
// status 1 with a message when an operation fails.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"

namespace {

struct Options {
  std::string socket;
  std::string target;
  std::string mode;
  uint64_t iters = 200;
  uint64_t batch = 1024;
  uint64_t size = 1 << 20;
  uint64_t qd = 8;
  double seconds = 2;
};

[[noreturn]] void Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "queue_ops_bench: %s: %s\n", what.c_str(),
               s.ToString().c_str());
  std::exit(1);
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

// Polls until `n` completions came, failing on any that is not OK.
void Drain(rdmad::Queue& q, uint64_t n, std::vector<rdmad::Completion>& out) {
  uint64_t got = 0;
  while (got < n) {
    const size_t k = q.Poll(absl::MakeSpan(out));
    for (size_t i = 0; i < k; ++i) {
      if (!out[i].status.ok()) Fail("operation", out[i].status);
    }
    got += k;
    if (k == 0) {
      if (absl::Status s = q.Wait(absl::Seconds(10)); !s.ok()) Fail("wait", s);
    }
  }
}

int Run(const Options& o) {
  auto client = rdmad::Client::Connect({.socket_path = o.socket});
  if (!client.ok()) Fail("connect", client.status());
  auto remote = rdmad::RemoteRegion::Parse(o.target);
  if (!remote.ok()) Fail("target", remote.status());
  auto handle = (*client)->OpenRemote(*remote);
  if (!handle.ok()) Fail("open_remote", handle.status());
  const uint64_t bytes = std::max(o.batch * 8, o.size * o.qd);
  auto buf = (*client)->Allocate(bytes);
  if (!buf.ok()) Fail("allocate", buf.status());
  std::memset(buf->data(), 1, bytes);
  auto queue = (*client)->OpenQueue(
      {.depth = static_cast<uint32_t>(std::max<uint64_t>(o.batch, 256)),
       .completion_depth =
           static_cast<uint32_t>(std::max<uint64_t>(2 * o.batch, 512))});
  if (!queue.ok()) Fail("open_queue", queue.status());
  rdmad::Queue& q = **queue;
  std::vector<rdmad::Completion> polled(std::max<uint64_t>(2 * o.batch, 512));

  if (o.mode == "submit") {
    std::vector<rdmad::Op> ops;
    for (uint64_t i = 0; i < o.batch; ++i) {
      ops.push_back({.kind = rdmad::Op::Kind::kWrite,
                     .local = &*buf,
                     .local_offset = i * 8,
                     .remote = &*handle,
                     .remote_offset = i * 8,
                     .length = 8,
                     .tag = i});
    }
    std::vector<double> per_op;
    for (uint64_t round = 0; round < o.iters; ++round) {
      const absl::Time start = absl::Now();
      auto queued = q.Submit(ops);
      const absl::Duration took = absl::Now() - start;
      if (!queued.ok()) Fail("submit", queued.status());
      if (*queued != ops.size()) {
        Fail("submit", absl::InternalError("the batch did not fit"));
      }
      per_op.push_back(absl::ToDoubleNanoseconds(took) / ops.size());
      Drain(q, ops.size(), polled);
    }
    std::printf(
        "{\"mode\": \"submit\", \"batch\": %llu, \"ns_per_op\": %.2f}\n",
        static_cast<unsigned long long>(o.batch), Percentile(per_op, 0.5));
  } else if (o.mode == "latency") {
    const rdmad::Op op{.kind = rdmad::Op::Kind::kWrite,
                       .local = &*buf,
                       .remote = &*handle,
                       .length = 8};
    std::vector<double> us;
    for (uint64_t i = 0; i < o.iters; ++i) {
      const absl::Time start = absl::Now();
      auto queued = q.Submit({&op, 1});
      if (!queued.ok()) Fail("submit", queued.status());
      Drain(q, 1, polled);
      us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    }
    std::printf("{\"mode\": \"latency\", \"p50_us\": %.2f, \"p99_us\": %.2f}\n",
                Percentile(us, 0.5), Percentile(us, 0.99));
  } else if (o.mode == "bandwidth") {
    std::vector<rdmad::Op> ops;
    for (uint64_t i = 0; i < o.qd; ++i) {
      ops.push_back({.kind = rdmad::Op::Kind::kWrite,
                     .local = &*buf,
                     .local_offset = i * o.size,
                     .remote = &*handle,
                     .remote_offset = i * o.size,
                     .length = o.size,
                     .tag = i});
    }
    auto queued = q.Submit(ops);
    if (!queued.ok() || *queued != ops.size()) Fail("submit", queued.status());
    uint64_t done = 0;
    const absl::Time start = absl::Now();
    const absl::Time end = start + absl::Seconds(o.seconds);
    while (absl::Now() < end) {
      const size_t k = q.Poll(absl::MakeSpan(polled));
      for (size_t i = 0; i < k; ++i) {
        if (!polled[i].status.ok()) Fail("operation", polled[i].status);
        auto again = q.Submit({&ops[polled[i].tag], 1});
        if (!again.ok()) Fail("submit", again.status());
      }
      done += k;
      if (k == 0) {
        if (absl::Status s = q.Wait(absl::Seconds(10)); !s.ok()) {
          Fail("wait", s);
        }
      }
    }
    const double secs = absl::ToDoubleSeconds(absl::Now() - start);
    Drain(q, q.in_flight(), polled);
    std::printf(
        "{\"mode\": \"bandwidth\", \"size\": %llu, \"qd\": %llu, "
        "\"gbytes_per_s\": %.3f}\n",
        static_cast<unsigned long long>(o.size),
        static_cast<unsigned long long>(o.qd), done * o.size / secs / 1e9);
  } else {
    std::fprintf(stderr, "queue_ops_bench: --mode submit|latency|bandwidth\n");
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    bool ok = true;
    if (flag == "--socket") {
      o.socket = value;
    } else if (flag == "--target") {
      o.target = value;
    } else if (flag == "--mode") {
      o.mode = value;
    } else if (flag == "--iters") {
      ok = absl::SimpleAtoi(value, &o.iters);
    } else if (flag == "--batch") {
      ok = absl::SimpleAtoi(value, &o.batch);
    } else if (flag == "--size") {
      ok = absl::SimpleAtoi(value, &o.size);
    } else if (flag == "--qd") {
      ok = absl::SimpleAtoi(value, &o.qd);
    } else if (flag == "--seconds") {
      ok = absl::SimpleAtod(value, &o.seconds);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "queue_ops_bench: bad flag %s %s\n", flag.c_str(),
                   value);
      return 2;
    }
  }
  if (o.socket.empty() || o.target.empty() || o.qd == 0 || o.batch == 0) {
    std::fprintf(stderr,
                 "usage: queue_ops_bench --socket PATH --target ADDRESS "
                 "--mode submit|latency|bandwidth [--iters N] [--batch N] "
                 "[--size BYTES] [--qd N] [--seconds S]\n");
    return 2;
  }
  return Run(o);
}
