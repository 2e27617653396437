// rdmad_mesh_bench: what many peers cost one daemon, and how long a mesh
// of daemons takes to come up (bench/mesh.sh runs it).
//
//   reach   one daemon's first 4 KiB WRITE to each of N peers (stand-ins:
//           tests/integration/stand_in_peers.cc), in stages: every peer of
//           a stage at once, in one Local.Batch. After each stage, the
//           daemon's threads, descriptors and RSS; after the first and the
//           last, the p50 of a 4 KiB WRITE to the first peer through a
//           queue, one at a time.
//
//     rdmad_mesh_bench reach --socket A.sock --pid PID --peers H:P,...
//         [--stages 1,100,1000] [--region bench] [--iters 2000]
//
//   mesh    N daemons all to all: each daemon's client sends, at the same
//           moment as the others, one 4 KiB WRITE to every other daemon in
//           one Local.Batch; the time until the last one completed.
//
//     rdmad_mesh_bench mesh --sockets a.sock,b.sock,... --peers H:P,...
//         [--region bench]
//
// Prints one machine-readable line per figure:
//   RESULT metric=NAME value=V
// and exits 1 when a transfer failed (the figures are still printed).
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/barrier.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/rdmactl/bench_stats.h"
#include "client/rpc_path.h"
#include "common/tool_flags.h"
#include "rdmad/client.h"

namespace {

using ::rdmad::ToolFlags;
constexpr uint64_t kOpBytes = 4096;

struct Args {
  std::string mode;
  std::string socket;
  std::vector<std::string> sockets;
  std::vector<std::string> peers;
  std::vector<size_t> stages;
  std::string region = "bench";
  pid_t pid = 0;
  int iters = 2000;
};

constexpr char kProgram[] = "rdmad_mesh_bench";
constexpr char kUsage[] =
    "reach --socket PATH --pid PID --peers H:P,... [--stages 1,100,1000] "
    "[--region NAME] [--iters N]\n  or: rdmad_mesh_bench mesh --sockets "
    "PATH,... --peers H:P,... [--region NAME]";

[[noreturn]] void Usage(const std::string& why) {
  ToolFlags(kProgram, kUsage).Fail(why);
}

Args ParseArgs(int argc, char** argv) {
  if (argc < 2) Usage("no mode");
  Args args;
  args.mode = argv[1];
  if (args.mode != "reach" && args.mode != "mesh") Usage("unknown mode");
  ToolFlags(kProgram, kUsage)
      .Text("--socket", &args.socket)
      .List("--sockets", &args.sockets)
      .List("--peers", &args.peers)
      .Custom("--stages",
              [&args](const std::string& value) {
                // Rising peer counts above 0.
                for (absl::string_view s : absl::StrSplit(value, ',')) {
                  size_t n = 0;
                  if (!absl::SimpleAtoi(s, &n) || n == 0 ||
                      (!args.stages.empty() && n <= args.stages.back())) {
                    return false;
                  }
                  args.stages.push_back(n);
                }
                return true;
              })
      .Text("--region", &args.region)
      .Number("--pid", &args.pid, 1)
      .Number("--iters", &args.iters, 10)
      .Parse(argc, argv, 2);
  if (args.peers.empty()) Usage("--peers is required");
  return args;
}

void Result(const std::string& metric, double value) {
  std::printf("RESULT metric=%s value=%.6g\n", metric.c_str(), value);
  std::fflush(stdout);
}

int CountEntries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

// VmRSS of `pid` in KiB.
long RssKib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    long kib = 0;
    if (line.rfind("VmRSS:", 0) == 0 &&
        absl::SimpleAtoi(
            absl::StripAsciiWhitespace(absl::StripSuffix(line.substr(6), "kB")),
            &kib)) {
      return kib;
    }
  }
  return -1;
}

// The daemon's threads, descriptors and RSS once they stopped changing
// (gRPC starts some threads lazily; the daemon gives freed heap back every
// 2 s), sampled for at most 10 s.
struct ProcessUsage {
  int threads = 0;
  int fds = 0;
  long rss_kib = 0;
};
ProcessUsage Settled(pid_t pid) {
  const std::string proc = absl::StrCat("/proc/", pid);
  ProcessUsage last{CountEntries(proc + "/task"), CountEntries(proc + "/fd"),
                    RssKib(pid)};
  for (int stable = 0, i = 0; stable < 6 && i < 40; ++i) {
    absl::SleepFor(absl::Milliseconds(250));
    ProcessUsage now{CountEntries(proc + "/task"), CountEntries(proc + "/fd"),
                     RssKib(pid)};
    const bool same = now.threads == last.threads && now.fds == last.fds &&
                      std::labs(now.rss_kib - last.rss_kib) <= 64;
    stable = same ? stable + 1 : 0;
    last = now;
  }
  return last;
}

std::unique_ptr<rdmad::Client> ConnectTo(const std::string& socket) {
  auto client = rdmad::Client::Connect(rdmad::ClientOptions{
      .socket_path = socket, .timeout = absl::Seconds(60)});
  if (!client.ok()) {
    std::fprintf(stderr, "%s: %s\n", socket.c_str(),
                 client.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(client);
}

// One WRITE of kOpBytes to each of `targets`, in one Local.Batch. Returns
// how many failed (printing the first few).
size_t WriteEach(rdmad::Client& client, const rdmad::Buffer& buffer,
                 const std::vector<rdmad::RemoteRegion>& targets, size_t begin,
                 size_t end) {
  std::vector<rdmad::Op> ops;
  for (size_t i = begin; i < end; ++i) {
    ops.push_back({.kind = rdmad::Op::Kind::kWrite,
                   .local = &buffer,
                   .remote = &targets[i],
                   .length = kOpBytes,
                   .tag = i});
  }
  size_t failed = 0;
  // Local.Batch takes up to 4096 operations per call.
  for (size_t at = 0; at < ops.size(); at += 4096) {
    const size_t n = std::min<size_t>(4096, ops.size() - at);
    auto results = rdmad::client_internal::RpcPath::Run(
        client, absl::MakeConstSpan(ops).subspan(at, n));
    if (!results.ok()) {
      std::fprintf(stderr, "Batch: %s\n", results.status().ToString().c_str());
      return end - begin;
    }
    for (const rdmad::Completion& c : *results) {
      if (c.status.ok()) continue;
      if (failed++ < 5) {
        std::fprintf(stderr, "WRITE to %s: %s\n", targets[c.tag].peer.c_str(),
                     c.status.ToString().c_str());
      }
    }
  }
  return failed;
}

// p50 in microseconds of one 4 KiB WRITE to `target` at a time, through a
// queue.
double WriteP50Us(rdmad::Client& client, const rdmad::Buffer& buffer,
                  const rdmad::RemoteRegion& target, int iters) {
  auto queue = client.OpenQueue();
  auto handle = client.OpenRemote(target);
  if (!queue.ok() || !handle.ok()) {
    std::fprintf(stderr, "queue: %s %s\n", queue.status().ToString().c_str(),
                 handle.status().ToString().c_str());
    return -1;
  }
  rdmad::Op op{.kind = rdmad::Op::Kind::kWrite,
               .local = &buffer,
               .remote = &*handle,
               .length = kOpBytes};
  std::vector<int64_t> ns;
  for (int i = -iters / 10; i < iters; ++i) {
    const absl::Time start = absl::Now();
    auto done = (*queue)->Run(absl::MakeConstSpan(&op, 1));
    const absl::Duration took = absl::Now() - start;
    if (!done.ok() || !(*done)[0].status.ok()) {
      std::fprintf(stderr, "WRITE: %s\n",
                   done.ok() ? (*done)[0].status.ToString().c_str()
                             : done.status().ToString().c_str());
      return -1;
    }
    if (i >= 0) ns.push_back(absl::ToInt64Nanoseconds(took));
  }
  std::sort(ns.begin(), ns.end());
  return rdmad::rdmactl::Percentile(ns, 50) / 1e3;
}

std::vector<rdmad::RemoteRegion> Targets(const Args& args) {
  std::vector<rdmad::RemoteRegion> targets;
  for (const std::string& peer : args.peers) {
    targets.push_back({.peer = peer, .name = args.region});
  }
  return targets;
}

int Reach(const Args& args) {
  if (args.socket.empty() || args.pid == 0)
    Usage("reach needs --socket and --pid");
  std::vector<size_t> stages = args.stages;
  if (stages.empty()) stages.push_back(args.peers.size());
  if (stages.back() > args.peers.size())
    Usage("a stage has more peers than --peers");
  auto client = ConnectTo(args.socket);
  auto buffer = client->Allocate(kOpBytes);
  if (!buffer.ok()) {
    std::fprintf(stderr, "%s\n", buffer.status().ToString().c_str());
    return 1;
  }
  const std::vector<rdmad::RemoteRegion> targets = Targets(args);
  size_t failed = 0;
  size_t reached = 0;
  absl::Duration bringing_up;
  for (size_t stage : stages) {
    const absl::Time start = absl::Now();
    failed += WriteEach(*client, *buffer, targets, reached, stage);
    const absl::Duration took = absl::Now() - start;
    bringing_up += took;
    Result(absl::StrCat("stage_seconds_", stage), absl::ToDoubleSeconds(took));
    reached = stage;
    if (stages.size() == 1) break;
    const ProcessUsage u = Settled(args.pid);
    Result(absl::StrCat("threads_", stage), u.threads);
    Result(absl::StrCat("fds_", stage), u.fds);
    Result(absl::StrCat("rss_kib_", stage), static_cast<double>(u.rss_kib));
    if (stage == stages.front() || stage == stages.back()) {
      Result(absl::StrCat("write_p50_us_", stage),
             WriteP50Us(*client, *buffer, targets[0], args.iters));
    }
  }
  Result("peers", static_cast<double>(reached));
  Result("seconds_to_last_first_write", absl::ToDoubleSeconds(bringing_up));
  Result("failures", static_cast<double>(failed));
  return failed == 0 ? 0 : 1;
}

int Mesh(const Args& args) {
  if (args.sockets.size() != args.peers.size() || args.sockets.size() < 2) {
    Usage("mesh needs as many --sockets as --peers, at least 2");
  }
  const size_t n = args.sockets.size();
  const std::vector<rdmad::RemoteRegion> all = Targets(args);
  std::vector<std::unique_ptr<rdmad::Client>> clients;
  std::vector<rdmad::Buffer> buffers;
  std::vector<std::vector<rdmad::RemoteRegion>> targets(n);
  for (size_t i = 0; i < n; ++i) {
    clients.push_back(ConnectTo(args.sockets[i]));
    auto buffer = clients.back()->Allocate(kOpBytes);
    if (!buffer.ok()) {
      std::fprintf(stderr, "%s\n", buffer.status().ToString().c_str());
      return 1;
    }
    buffers.push_back(*std::move(buffer));
    for (size_t j = 0; j < n; ++j) {
      if (j != i) targets[i].push_back(all[j]);
    }
  }
  std::vector<size_t> failed(n, 0);
  absl::Barrier* start = new absl::Barrier(static_cast<int>(n) + 1);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      if (start->Block()) delete start;
      failed[i] =
          WriteEach(*clients[i], buffers[i], targets[i], 0, targets[i].size());
    });
  }
  const absl::Time begin = absl::Now();
  if (start->Block()) delete start;
  for (auto& t : threads) t.join();
  const absl::Duration took = absl::Now() - begin;
  size_t failures = 0;
  for (size_t f : failed) failures += f;
  Result("daemons", static_cast<double>(n));
  Result("transfers", static_cast<double>(n * (n - 1)));
  Result("seconds_to_last_first_write", absl::ToDoubleSeconds(took));
  Result("failures", static_cast<double>(failures));
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  return args.mode == "reach" ? Reach(args) : Mesh(args);
}
