// rdmad_control_bench: the control plane's costs, each beside a reference
// measured in the same run:
//
//   local call    latency of a unary Local call (GetStatus) over the Unix
//                 socket, vs. gRPC's own floor: grpc.health.v1.Health/Check
//                 on the same socket and server.
//   registration  Allocate() of a shared, registered buffer, in ms per GiB,
//                 vs. what any shared buffer costs: memfd_create + ftruncate
//                 + mmap(MAP_POPULATE) of the same size in this process.
//   peer setup    the first transfer to a daemon never contacted before
//                 (Hello, Connect: QPs or TCP data connections, Resolve)
//                 minus a steady-state transfer to it, vs. a new gRPC
//                 channel's first call to that daemon's Peer port.
//
//   rdmad_control_bench --socket A.sock --fresh-peers H:P,H:P,...
//       [--region NAME] [--calls N] [--reg-size SIZE] [--reg-reps N]
//
// Every --fresh-peers daemon must export --region (default "bench", >= 8
// bytes, rw) and must not have been contacted by A before. Prints a table
// and one machine-readable line per figure:
//   RESULT metric=... rdmad=... reference=... unit=...
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/rdmactl/bench_stats.h"
#include "common/tool_flags.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "rdmad/client.h"

namespace {

using ::rdmad::ToolFlags;
struct Args {
  std::string socket = "/run/rdmad/rdmad.sock";
  std::vector<std::string> fresh_peers;
  std::string region = "bench";
  int calls = 2000;
  uint64_t reg_size = uint64_t{1} << 30;
  int reg_reps = 3;
};

Args ParseArgs(int argc, char** argv) {
  Args args;
  ToolFlags("rdmad_control_bench",
            "--socket PATH --fresh-peers HOST:PORT[,...] [--region NAME] "
            "[--calls N] [--reg-size SIZE] [--reg-reps N]")
      .Text("--socket", &args.socket)
      .List("--fresh-peers", &args.fresh_peers)
      .Text("--region", &args.region)
      .Number("--calls", &args.calls, 10)
      .Bytes("--reg-size", &args.reg_size)
      .Number("--reg-reps", &args.reg_reps, 1)
      .Parse(argc, argv);
  return args;
}

[[noreturn]] void Die(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "rdmad_control_bench: %s: %s\n", what.c_str(),
               status.ToString().c_str());
  std::exit(1);
}

// The `percent` percentile of `samples` (sorted in place), in microseconds:
// the same nearest-rank definition as rdmactl bench's.
double PercentileUs(std::vector<int64_t>& samples_ns, double percent) {
  std::sort(samples_ns.begin(), samples_ns.end());
  return rdmad::rdmactl::Percentile(samples_ns, percent) / 1000.0;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

struct Row {
  std::string metric;
  double rdmad;
  double reference;
  std::string unit;
  std::string reference_name;
};

void HealthCheck(grpc::health::v1::Health::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub.Check(&context, request, &response);
  if (!status.ok()) {
    Die("Health/Check", absl::Status(static_cast<absl::StatusCode>(
                                         status.error_code()),
                                     status.error_message()));
  }
}

// Unary Local call vs. a health check on the same socket.
void LocalCall(rdmad::Client& client, const Args& args,
               std::vector<Row>& rows) {
  auto channel = grpc::CreateChannel("unix:" + args.socket,
                                     grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  for (int i = 0; i < 100; ++i) {  // warm both paths up
    if (auto s = client.GetStatus(); !s.ok()) Die("GetStatus", s.status());
    HealthCheck(*health);
  }
  std::vector<int64_t> ours, floor;  // nanoseconds
  ours.reserve(args.calls);
  floor.reserve(args.calls);
  // Interleaved, so that both see the same machine.
  for (int i = 0; i < args.calls; ++i) {
    absl::Time start = absl::Now();
    if (auto s = client.GetStatus(); !s.ok()) Die("GetStatus", s.status());
    ours.push_back(absl::ToInt64Nanoseconds(absl::Now() - start));
    start = absl::Now();
    HealthCheck(*health);
    floor.push_back(absl::ToInt64Nanoseconds(absl::Now() - start));
  }
  rows.push_back({"local call p50", PercentileUs(ours, 50),
                  PercentileUs(floor, 50), "us", "Health/Check, same socket"});
  rows.push_back({"local call p99", PercentileUs(ours, 99),
                  PercentileUs(floor, 99), "us", "Health/Check, same socket"});
}

// Huge pages reserved on this machine (/proc/sys/vm/nr_hugepages)? rdmad
// backs regions with them then, and the reference must too.
bool HugePagesReserved() {
  FILE* f = std::fopen("/proc/sys/vm/nr_hugepages", "r");
  if (f == nullptr) return false;
  long pages = 0;
  const bool read = std::fscanf(f, "%ld", &pages) == 1;
  std::fclose(f);
  return read && pages > 0;
}

// Allocate() vs. creating and populating a shared mapping of the same size
// and page size.
void Registration(rdmad::Client& client, const Args& args,
                  std::vector<Row>& rows) {
  const bool huge = HugePagesReserved() && args.reg_size % (2 << 20) == 0;
  const double gib = static_cast<double>(args.reg_size) / (1 << 30);
  std::vector<double> ours, floor;
  for (int i = 0; i < args.reg_reps; ++i) {
    absl::Time start = absl::Now();
    {
      auto buffer = client.Allocate(args.reg_size);
      if (!buffer.ok()) Die("Allocate", buffer.status());
      ours.push_back(absl::ToDoubleMilliseconds(absl::Now() - start) / gib);
    }  // freed here, outside the timing

    start = absl::Now();
    const int fd = memfd_create("rdmad-bench-reference",
                                MFD_CLOEXEC | (huge ? MFD_HUGETLB : 0));
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(args.reg_size)) != 0) {
      Die("memfd reference", absl::ErrnoToStatus(errno, "memfd/ftruncate"));
    }
    void* map = mmap(nullptr, args.reg_size, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) {
      Die("memfd reference", absl::ErrnoToStatus(errno, "mmap"));
    }
    floor.push_back(absl::ToDoubleMilliseconds(absl::Now() - start) / gib);
    munmap(map, args.reg_size);
    close(fd);
  }
  rows.push_back({"registration", Median(ours), Median(floor), "ms/GiB",
                  huge ? "memfd(HUGETLB)+mmap(MAP_POPULATE)"
                       : "memfd+mmap(MAP_POPULATE)"});
}

// First transfer to a fresh peer, less a steady one, vs. a new gRPC
// channel's first call to the peer's port.
void PeerSetup(rdmad::Client& client, const Args& args,
               std::vector<Row>& rows) {
  if (args.fresh_peers.empty()) return;
  auto buffer = client.Allocate(4096);
  if (!buffer.ok()) Die("Allocate", buffer.status());
  std::vector<double> ours, floor;
  for (const std::string& peer : args.fresh_peers) {
    // The reference first: a new channel's first call pays DNS, TCP and
    // HTTP/2 set-up, which rdmad's Hello pays too.
    absl::Time start = absl::Now();
    {
      grpc::ChannelArguments channel_args;
      channel_args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      auto channel = grpc::CreateCustomChannel(
          peer, grpc::InsecureChannelCredentials(), channel_args);
      auto health = grpc::health::v1::Health::NewStub(channel);
      HealthCheck(*health);
    }
    floor.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));

    rdmad::RemoteRegion remote{.peer = peer, .name = args.region};
    start = absl::Now();
    auto first = client.Write(*buffer, 0, remote, 0, 8);
    const absl::Duration first_took = absl::Now() - start;
    if (!first.ok()) Die("first write to " + peer, first.status());
    std::vector<int64_t> steady;  // nanoseconds
    for (int i = 0; i < 50; ++i) {
      start = absl::Now();
      auto w = client.Write(*buffer, 0, remote, 0, 8);
      if (!w.ok()) Die("write to " + peer, w.status());
      steady.push_back(absl::ToInt64Nanoseconds(absl::Now() - start));
    }
    ours.push_back(absl::ToDoubleMilliseconds(first_took) -
                   PercentileUs(steady, 50) / 1000);
  }
  rows.push_back({"peer setup", Median(ours), Median(floor), "ms",
                  "new gRPC channel + first call"});
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  auto client = rdmad::Client::Connect({.socket_path = args.socket});
  if (!client.ok()) Die("connect", client.status());

  std::vector<Row> rows;
  LocalCall(**client, args, rows);
  Registration(**client, args, rows);
  PeerSetup(**client, args, rows);

  std::printf("%-16s %12s %12s %7s  %-8s %s\n", "metric", "rdmad",
              "reference", "ratio", "unit", "reference is");
  for (const Row& row : rows) {
    std::printf("%-16s %12.2f %12.2f %6.2fx  %-8s %s\n", row.metric.c_str(),
                row.rdmad, row.reference, row.rdmad / row.reference,
                row.unit.c_str(), row.reference_name.c_str());
  }
  for (const Row& row : rows) {
    std::string metric = row.metric;
    std::replace(metric.begin(), metric.end(), ' ', '_');
    std::printf("RESULT metric=%s rdmad=%.3f reference=%.3f unit=%s\n",
                metric.c_str(), row.rdmad, row.reference, row.unit.c_str());
  }
  return 0;
}
