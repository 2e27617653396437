// rdmad_tcp_bench: WRITE/READ bandwidth through the client library to a
// region on another daemon, with several transfers in flight.
//
//   rdmad_tcp_bench --socket /tmp/a.sock --remote 127.0.0.1:7471/bench
//       [--sizes 64K,1M,16M] [--seconds 3] [--inflight 4] [--ops write,read]
//
// The remote region must exist, be exported rw and hold at least
// inflight x the largest size. Each of `inflight` threads loops one
// synchronous transfer at a time on its own slice, so `inflight` transfers
// are outstanding at once. Prints one line per (op, size):
//   RESULT op=write size=1048576 transfers=1234 bytes=... seconds=3.00 MBps=...
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "rdmad/client.h"

namespace {

struct Args {
  std::string socket = "/run/rdmad/rdmad.sock";
  std::string remote;
  std::vector<uint64_t> sizes = {64 << 10, 1 << 20, 16 << 20};
  double seconds = 3;
  int inflight = 4;
  std::vector<std::string> ops = {"write", "read"};
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "rdmad_tcp_bench: %s\nusage: rdmad_tcp_bench --socket PATH "
               "--remote PEER/NAME [--sizes 64K,1M,16M] [--seconds S] "
               "[--inflight N] [--ops write,read]\n",
               why);
  std::exit(2);
}

uint64_t ParseSize(const std::string& text) {
  uint64_t multiplier = 1;
  std::string digits = text;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K': case 'k': multiplier = 1 << 10; break;
      case 'M': case 'm': multiplier = 1 << 20; break;
      case 'G': case 'g': multiplier = 1 << 30; break;
      default: break;
    }
    if (multiplier != 1) digits.pop_back();
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(digits, &value) || value == 0) Usage("bad size");
  return value * multiplier;
}

Args Parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage("missing value");
    const std::string value = argv[++i];
    if (flag == "--socket") {
      args.socket = value;
    } else if (flag == "--remote") {
      args.remote = value;
    } else if (flag == "--sizes") {
      args.sizes.clear();
      for (absl::string_view s : absl::StrSplit(value, ',')) {
        args.sizes.push_back(ParseSize(std::string(s)));
      }
    } else if (flag == "--seconds") {
      if (!absl::SimpleAtod(value, &args.seconds)) Usage("bad --seconds");
    } else if (flag == "--inflight") {
      if (!absl::SimpleAtoi(value, &args.inflight) || args.inflight < 1) {
        Usage("bad --inflight");
      }
    } else if (flag == "--ops") {
      args.ops = absl::StrSplit(value, ',');
    } else {
      Usage("unknown flag");
    }
  }
  if (args.remote.empty()) Usage("--remote is required");
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  auto client = rdmad::Client::Connect(
      {.socket_path = args.socket, .timeout = absl::Seconds(60)});
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto remote = rdmad::RemoteRegion::Parse(args.remote);
  if (!remote.ok()) {
    std::fprintf(stderr, "--remote: %s\n", remote.status().ToString().c_str());
    return 2;
  }
  uint64_t largest = 0;
  for (uint64_t s : args.sizes) largest = std::max(largest, s);
  auto buffer = (*client)->Allocate(largest * args.inflight);
  if (!buffer.ok()) {
    std::fprintf(stderr, "allocate: %s\n", buffer.status().ToString().c_str());
    return 1;
  }
  // Touch every page so first-use faults are not measured.
  std::memset(buffer->data(), 0x5a, buffer->size());

  for (const std::string& op : args.ops) {
    const bool write = op == "write";
    if (!write && op != "read") Usage("--ops takes write and read");
    for (uint64_t size : args.sizes) {
      // Warm-up: connections, name resolution, page faults on both sides.
      for (int i = 0; i < args.inflight; ++i) {
        auto r = write ? (*client)->Write(*buffer, i * size, *remote, i * size, size)
                       : (*client)->Read(*buffer, i * size, *remote, i * size, size);
        if (!r.ok()) {
          std::fprintf(stderr, "%s %llu: %s\n", op.c_str(),
                       static_cast<unsigned long long>(size),
                       r.status().ToString().c_str());
          return 1;
        }
      }
      std::atomic<bool> stop{false};
      std::atomic<uint64_t> transfers{0};
      std::atomic<int> errors{0};
      std::vector<std::thread> threads;
      const absl::Time start = absl::Now();
      for (int t = 0; t < args.inflight; ++t) {
        threads.emplace_back([&, t] {
          const uint64_t offset = t * size;
          while (!stop.load(std::memory_order_relaxed)) {
            auto r = write ? (*client)->Write(*buffer, offset, *remote, offset, size)
                           : (*client)->Read(*buffer, offset, *remote, offset, size);
            if (!r.ok()) {
              if (errors++ == 0) {
                std::fprintf(stderr, "%s: %s\n", op.c_str(),
                             r.status().ToString().c_str());
              }
              return;
            }
            transfers++;
          }
        });
      }
      absl::SleepFor(absl::Seconds(args.seconds));
      stop = true;
      for (auto& t : threads) t.join();
      const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
      const double bytes = static_cast<double>(transfers.load()) * size;
      std::printf(
          "RESULT op=%s size=%llu transfers=%llu bytes=%.0f seconds=%.3f "
          "MBps=%.1f errors=%d\n",
          op.c_str(), static_cast<unsigned long long>(size),
          static_cast<unsigned long long>(transfers.load()), bytes, elapsed,
          bytes / elapsed / 1e6, errors.load());
      std::fflush(stdout);
      if (errors.load() != 0) return 1;
    }
  }
  return 0;
}
