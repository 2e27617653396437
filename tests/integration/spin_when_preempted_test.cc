// Spinning on a CPU shared with another busy thread: by default a waiter
// that was preempted stops spinning for a while (common/spin_gate.h), so
// the client sleeps in Queue::Wait and each completion wakes it, and the
// engine sleeps between operations and each submission rings its
// doorbell; QueueOptions::spin_when_preempted and the daemon's
// engine_spin_when_preempted keep them spinning instead (for a CPU of
// their own, and for soft-RoCE, whose kernel threads preempt them). The
// queue's counters (ListQueues: client_wakeups, doorbells) say which
// happened; each case checks that the thread was preempted at all.
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

constexpr uint64_t kRegionSize = 4096;
constexpr uint64_t kOps = 300;

// The first CPU this process may run on.
int FirstAllowedCpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) return cpu;
  }
  return 0;
}

bool PinCallingThread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return ::sched_setaffinity(0, sizeof(set), &set) == 0;
}

// Involuntary context switches of thread `tid` of process `pid` so far;
// -1 if unreadable.
int64_t Preemptions(pid_t pid, pid_t tid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/task/", tid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (!absl::StartsWith(line, "nonvoluntary_ctxt_switches:")) continue;
    int64_t n = -1;
    std::vector<absl::string_view> parts =
        absl::StrSplit(line, ':', absl::SkipWhitespace());
    if (parts.size() == 2 &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(parts[1]), &n)) {
      return n;
    }
  }
  return -1;
}

// The sum of `pid`'s threads' involuntary context switches.
int64_t ProcessPreemptions(pid_t pid) {
  int64_t sum = 0;
  const std::string dir = absl::StrCat("/proc/", pid, "/task");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    pid_t tid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &tid)) continue;
    const int64_t n = Preemptions(pid, tid);
    if (n > 0) sum += n;
  }
  return sum;
}

// A thread that keeps `cpu` busy until destroyed.
class Burner {
 public:
  explicit Burner(int cpu)
      : thread_([this, cpu] {
          pinned_ = PinCallingThread(cpu);
          started_ = true;
          while (!stop_.load(std::memory_order_relaxed)) {
          }
        }) {
    while (!started_.load()) std::this_thread::yield();
  }
  ~Burner() {
    stop_ = true;
    thread_.join();
  }
  bool pinned() const { return pinned_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> started_{false};
  std::atomic<bool> pinned_{false};
  std::thread thread_;
};

struct Counts {
  uint64_t completed = 0;
  uint64_t client_wakeups = 0;
  uint64_t doorbells = 0;
};

class SpinWhenPreemptedTest : public ::testing::Test {
 protected:
  // A daemon on `cpu` (all its threads) when `pin_daemon`, with `config`.
  void StartDaemon(const std::string& config, bool pin_daemon, int cpu) {
    DaemonOptions options{.config = config};
    if (pin_daemon) {
      options.command_prefix = {"/usr/bin/taskset", "-c", absl::StrCat(cpu)};
    }
    auto d = DaemonProcess::Start(dir_.path(), "d", std::move(options));
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    client_ = Connect(*daemon_);
    ASSERT_NE(client_, nullptr);
    auto target = CreateOwnTarget(*client_, "target", kRegionSize);
    ASSERT_TRUE(target.ok()) << target.status();
    target_ = std::move(*target);
  }

  // 8-byte WRITEs one at a time on a queue opened with `options`, kOps of
  // them and for `at_least`; returns the queue's counters.
  Counts RunOneAtATime(QueueOptions options,
                       absl::Duration at_least = absl::ZeroDuration()) {
    const absl::Time until = absl::Now() + at_least;
    auto queue = client_->OpenQueue(options);
    EXPECT_TRUE(queue.ok()) << queue.status();
    if (!queue.ok()) return {};
    const Op op{.kind = Op::Kind::kWrite,
                .local = target_.source.get(),
                .remote = &target_.handle,
                .length = 8};
    std::vector<Completion> done(4);
    uint64_t ops = 0;
    for (; ops < kOps || absl::Now() < until; ++ops) {
      auto submitted = (*queue)->Submit({&op, 1});
      EXPECT_TRUE(submitted.ok() && *submitted == 1) << submitted.status();
      size_t got = 0;
      while (got == 0) {
        got = (*queue)->Poll(absl::MakeSpan(done));
        if (got == 0) {
          absl::Status waited = (*queue)->Wait(absl::Seconds(30));
          EXPECT_TRUE(waited.ok()) << waited;
          if (!waited.ok()) return {};
        }
      }
      EXPECT_TRUE(done[0].status.ok()) << done[0].status;
    }
    const QueueInfo q = ListedQueue(*client_, (*queue)->id());
    EXPECT_EQ(q.completed, ops);
    return {.completed = q.completed,
            .client_wakeups = q.client_wakeups,
            .doorbells = q.doorbells};
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  OwnTarget target_;
};

// The client thread shares its CPU with a burner. Spinning 1 s (longer
// than any operation takes, a burner's time slices included), a waiter
// that keeps spinning when preempted never sleeps: no completion wakes
// it. One that stops (the default) sleeps, and completions wake it: a
// second of operations each way.
TEST_F(SpinWhenPreemptedTest, AQueueWaiterSpinsOnThroughPreemptions) {
  const int cpu = FirstAllowedCpu();
  ASSERT_NO_FATAL_FAILURE(StartDaemon("", /*pin_daemon=*/false, cpu));
  std::atomic<bool> ok{true};
  Counts spun, gated;
  int64_t preempted_spinning = 0;
  std::thread client([&] {
    if (!PinCallingThread(cpu)) {
      ok = false;
      return;
    }
    Burner burner(cpu);
    if (!burner.pinned()) {
      ok = false;
      return;
    }
    const pid_t pid = ::getpid();
    const pid_t tid = ::gettid();
    const int64_t before = Preemptions(pid, tid);
    spun =
        RunOneAtATime({.spin = absl::Seconds(1), .spin_when_preempted = true},
                      absl::Seconds(1));
    preempted_spinning = Preemptions(pid, tid) - before;
    gated = RunOneAtATime({.spin = absl::Seconds(1)}, absl::Seconds(1));
  });
  client.join();
  ASSERT_TRUE(ok) << "cannot pin threads to CPU " << cpu;
  EXPECT_GE(spun.completed, kOps);
  EXPECT_GE(gated.completed, kOps);
  // A burner on its CPU preempts a spinning thread every time slice. (A
  // gated one sleeps instead: it is woken, not preempted.)
  ASSERT_GT(preempted_spinning, 1);
  // Thresholds with room for a loaded machine (a sanitizer build beside
  // other tests): measured, none of 0.5-1.7 million operations woke a
  // spinning waiter, and 97% of 27-91 thousand woke a gated one.
  EXPECT_LE(spun.client_wakeups, spun.completed / 50)
      << "a waiter that spins through preemptions slept";
  EXPECT_GE(gated.client_wakeups, gated.completed / 10)
      << "a preempted waiter should sleep, not spin, by default";
}

// The daemon, all its threads, shares a CPU with a burner. An engine that
// keeps spinning when preempted (engine_spin_when_preempted; 20 ms, far
// longer than the client takes to submit the next operation) never sleeps
// between operations: no submission rings its doorbell. One that stops
// (the default) sleeps while its gate is closed (20 ms and more after each
// preemption), and submissions ring it: for a second of operations, many.
TEST_F(SpinWhenPreemptedTest, AnEngineSpinsOnThroughPreemptions) {
  const int cpu = FirstAllowedCpu();
  Counts counts[2];
  for (const bool keep_spinning : {true, false}) {
    SCOPED_TRACE(keep_spinning ? "engine_spin_when_preempted: true"
                               : "default");
    const std::string config =
        absl::StrCat("engine_spin_us: 20000\n",
                     keep_spinning ? "engine_spin_when_preempted: true\n" : "");
    ASSERT_NO_FATAL_FAILURE(StartDaemon(config, /*pin_daemon=*/true, cpu));
    Burner burner(cpu);
    ASSERT_TRUE(burner.pinned()) << "cannot pin a thread to CPU " << cpu;
    const int64_t before = ProcessPreemptions(daemon_->pid());
    // The client does not spin: it sleeps at once, so that only the
    // engine decides whether the doorbell rings.
    counts[keep_spinning] =
        RunOneAtATime({.spin = absl::ZeroDuration()}, absl::Seconds(1));
    ASSERT_GT(ProcessPreemptions(daemon_->pid()) - before, 1)
        << "the daemon's threads were never preempted";
    EXPECT_GE(counts[keep_spinning].completed, kOps);
    client_.reset();
    daemon_.reset();
  }
  // Measured: one doorbell (the first submission) in 0.4 million
  // operations with the setting, half of 50 thousand without.
  EXPECT_LE(counts[true].doorbells, counts[true].completed / 50)
      << "an engine that spins through preemptions slept between operations";
  EXPECT_GE(counts[false].doorbells, counts[false].completed / 10)
      << "a preempted engine should sleep, not spin, by default";
}

}  // namespace
}  // namespace rdmad::testing
