// rdmad_restart_bench: how long a restart of rdmad takes when it keeps its
// named regions (docs/RESTART.md), beside the daemon's plain cold start
// measured in the same run:
//
//   cold start       exec of rdmad to READY=1, nothing kept (an empty state
//                    directory): the reference;
//   restart, dir     SIGTERM to the running daemon -> READY=1 of the next
//                    one, which adopts N regions (all pages resident) from
//                    a state directory on a tmpfs;
//   restart, dir,    the same after SIGKILL (nothing runs at shutdown);
//   SIGKILL
//   restart, store   SIGTERM -> READY=1 with the regions in the fd store of
//                    a stand-in for systemd (tests/integration/
//                    service_manager_stand_in.h), passed back by LISTEN_FDS.
//
// READY=1 arrives on the stand-in's notify socket, as systemd would see it.
// Each figure is the median of --iterations runs; after each restart the
// bench checks that every region came back with its bytes.
//
//   rdmad_restart_bench --rdmad PATH [--regions 16] [--region-size 64M]
//       [--iterations 5] [--transport tcp]
//
// Prints a table and one machine-readable line per figure:
//   RESULT metric=... ms=... reference_ms=...
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/tool_flags.h"
#include "rdmad/client.h"
#include "tests/integration/restart_helpers.h"
#include "tests/integration/service_manager_stand_in.h"

namespace {

using ::rdmad::ToolFlags;
using rdmad::testing::ChildProcess;
using rdmad::testing::ServiceManagerStandIn;

struct Args {
  std::string rdmad;
  int regions = 16;
  uint64_t region_size = 64ull << 20;
  int iterations = 5;
  std::string transport = "tcp";
};

[[noreturn]] void Fail(const std::string& why) {
  std::fprintf(stderr, "rdmad_restart_bench: %s\n", why.c_str());
  std::exit(1);
}

Args ParseArgs(int argc, char** argv) {
  Args args;
  ToolFlags flags("rdmad_restart_bench",
                  "--rdmad PATH [--regions N] [--region-size SIZE] "
                  "[--iterations N] [--transport tcp|auto|verbs]");
  flags.Text("--rdmad", &args.rdmad)
      .Number("--regions", &args.regions, 1, 1000)
      .Bytes("--region-size", &args.region_size)
      .Number("--iterations", &args.iterations, 1)
      .Text("--transport", &args.transport)
      .Parse(argc, argv);
  if (args.rdmad.empty()) flags.Fail("--rdmad is required");
  return args;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// One daemon under the stand-in, restarted in place.
class Bench {
 public:
  Bench(const Args& args, std::string work, std::string state_dir)
      : args_(args), work_(std::move(work)), state_dir_(std::move(state_dir)) {
    auto manager = ServiceManagerStandIn::Start(work_);
    if (!manager.ok()) Fail(manager.status().ToString());
    manager_ = *std::move(manager);
    std::ofstream(work_ + "/rdmad.conf")
        << "max_pinned_bytes: "
        << uint64_t{2} * args.regions * args.region_size + (64 << 20) << "\n";
  }
  ~Bench() { Stop(SIGTERM); }

  // exec -> READY=1.
  absl::Duration Start() {
    std::vector<std::string> argv = {
        args_.rdmad,     "--socket",    work_ + "/a.sock",
        "--peer_listen", "127.0.0.1:0", "--transport",
        args_.transport, "--config",    work_ + "/rdmad.conf",
        "--log_level",   "warn"};
    if (!state_dir_.empty()) {
      argv.push_back("--state_dir");
      argv.push_back(state_dir_);
    }
    const absl::Time start = absl::Now();
    auto child = manager_->Launch(argv, work_ + "/a.log");
    if (!child.ok()) Fail(child.status().ToString());
    daemon_ = *std::move(child);
    if (!manager_->WaitReady(absl::Seconds(120))) {
      Fail("no READY=1 from rdmad:\n" +
           rdmad::testing::ReadAll(work_ + "/a.log"));
    }
    return absl::Now() - start;
  }
  // `sig` -> exit.
  absl::Duration Stop(int sig) {
    if (daemon_ == nullptr) return absl::ZeroDuration();
    const absl::Time start = absl::Now();
    daemon_->Signal(sig);
    if (!daemon_->Wait(absl::Seconds(60)).ok()) Fail("rdmad did not exit");
    daemon_ = nullptr;
    return absl::Now() - start;
  }

  std::unique_ptr<rdmad::Client> Connect() {
    auto client = rdmad::Client::Connect(
        {.socket_path = work_ + "/a.sock", .timeout = absl::Seconds(120)});
    if (!client.ok()) Fail(client.status().ToString());
    return *std::move(client);
  }

  // Creates the regions and writes every page (resident, as a cache's).
  void Fill() {
    auto client = Connect();
    for (int i = 0; i < args_.regions; ++i) {
      const std::string name = absl::StrCat("bench", i);
      auto made = client->CreateRegion(name, args_.region_size,
                                       rdmad::Access::kReadWrite);
      if (!made.ok()) Fail(made.status().ToString());
      auto view = client->MapRegion(name);
      if (!view.ok()) Fail(view.status().ToString());
      std::memset(view->data(), 'a' + i % 26, view->size());
    }
  }
  // Every region back, with its bytes (first and last page).
  void Check() {
    auto client = Connect();
    auto status = client->GetStatus();
    if (!status.ok()) Fail(status.status().ToString());
    if (status->region_count != static_cast<uint64_t>(args_.regions) ||
        status->region_bytes != args_.regions * args_.region_size) {
      Fail(absl::StrCat("after the restart rdmad has ", status->region_count,
                        " regions (", status->region_bytes, " bytes), not ",
                        args_.regions));
    }
    for (int i = 0; i < args_.regions; ++i) {
      auto view = client->MapRegion(absl::StrCat("bench", i));
      if (!view.ok()) Fail(view.status().ToString());
      const char want = static_cast<char>('a' + i % 26);
      if (view->data()[0] != want || view->data()[view->size() - 1] != want) {
        Fail(absl::StrCat("region bench", i, " lost its bytes"));
      }
    }
  }
  void FreeAll() {
    auto client = Connect();
    for (int i = 0; i < args_.regions; ++i) {
      (void)client->FreeRegion(absl::StrCat("bench", i));
    }
  }

 private:
  const Args& args_;
  const std::string work_;
  const std::string state_dir_;
  std::unique_ptr<ServiceManagerStandIn> manager_;
  std::unique_ptr<ChildProcess> daemon_;
};

std::string TmpfsBase(uint64_t need) {
  const std::string user = absl::StrCat("/run/user/", ::getuid());
  for (const std::string& base :
       {std::string("/dev/shm"), user, std::string("/run")}) {
    if (!rdmad::testing::IsWritableTmpfs(base)) continue;
    struct statvfs fs;
    if (::statvfs(base.c_str(), &fs) != 0) continue;
    const uint64_t free = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (free < need) {
      std::fprintf(stderr, "# %s is a tmpfs but has %s free, %s needed\n",
                   base.c_str(), rdmad::FormatSize(free).c_str(),
                   rdmad::FormatSize(need).c_str());
      continue;
    }
    return base;
  }
  Fail(absl::StrCat("no tmpfs with ", rdmad::FormatSize(need),
                    " free for the state directory (checked /dev/shm, ", user,
                    ", /run): make room in /dev/shm (or mount -o remount,"
                    "size=... /dev/shm), or pass smaller --regions / "
                    "--region-size"));
}

void Print(const char* what, double ms, double reference_ms,
           const char* metric) {
  std::printf("%-52s %9.1f ms   (%.1fx cold start)\n", what, ms,
              ms / reference_ms);
  std::printf("RESULT metric=%s ms=%.2f reference_ms=%.2f\n", metric, ms,
              reference_ms);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  const uint64_t total = args.regions * args.region_size;
  const std::string base = TmpfsBase(total + (256ull << 20));
  std::string pattern = base + "/rdmad-restart-bench-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) Fail("mkdtemp in " + base);
  const std::string work = pattern;
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } cleanup{work};

  std::printf(
      "# restart bench: %d regions x %s = %s, all pages written; "
      "transport %s; state dir on the tmpfs %s; median of %d\n",
      args.regions, rdmad::FormatSize(args.region_size).c_str(),
      rdmad::FormatSize(total).c_str(), args.transport.c_str(), base.c_str(),
      args.iterations);

  std::vector<double> cold, dir_term, dir_term_stop, dir_kill, store_term;
  {
    Bench bench(args, work, work + "/state");
    for (int i = 0; i < args.iterations; ++i) {
      cold.push_back(absl::ToDoubleMilliseconds(bench.Start()));
      bench.Stop(SIGTERM);
    }
    bench.Start();
    bench.Fill();
    for (int i = 0; i < args.iterations; ++i) {
      const absl::Duration stop = bench.Stop(SIGTERM);
      const absl::Duration start = bench.Start();
      dir_term.push_back(absl::ToDoubleMilliseconds(stop + start));
      dir_term_stop.push_back(absl::ToDoubleMilliseconds(stop));
      bench.Check();
      const absl::Duration killed = bench.Stop(SIGKILL);
      dir_kill.push_back(absl::ToDoubleMilliseconds(killed + bench.Start()));
      bench.Check();
    }
    bench.FreeAll();
  }
  {
    const std::string store_work = work + "/store";
    std::filesystem::create_directories(store_work);
    Bench bench(args, store_work, "");
    bench.Start();
    bench.Fill();
    for (int i = 0; i < args.iterations; ++i) {
      const absl::Duration stop = bench.Stop(SIGTERM);
      store_term.push_back(absl::ToDoubleMilliseconds(stop + bench.Start()));
      bench.Check();
    }
    bench.FreeAll();
  }
  const double reference = Median(cold);
  std::printf("%-52s %9.1f ms\n", "cold start (exec to READY, nothing kept)",
              reference);
  std::printf("RESULT metric=cold_start ms=%.2f\n", reference);
  const std::string label = absl::StrCat(
      "restart, state dir (SIGTERM to READY, ", args.regions, " regions)");
  Print(label.c_str(), Median(dir_term), reference,
        "restart_state_dir_sigterm");
  std::printf("%-52s %9.1f ms\n", "  of which SIGTERM to exit",
              Median(dir_term_stop));
  Print("restart, state dir (SIGKILL to READY)", Median(dir_kill), reference,
        "restart_state_dir_sigkill");
  Print("restart, fd store (SIGTERM to READY)", Median(store_term), reference,
        "restart_fd_store_sigterm");
  return 0;
}
