// EventLoop: one thread that waits on file descriptors (epoll), runs
// timers, and runs tasks other threads hand it.
//
// Everything the daemon does on the data path runs on a few of these (see
// io_runtime.h): the TCP data channels and the TCP data server register
// their sockets, the verbs channels their completion channels. Objects that
// live on a loop keep their state confined to its thread, so they need no
// locks on the hot path; other threads reach them with Post().
//
// Watches are identified by an id rather than by fd: an event fetched for a
// watch that has since been removed (or whose fd number was reused) finds
// no watch with that id and is dropped.
//
// Example:
//   RDMAD_ASSIGN_OR_RETURN(auto loop, EventLoop::Create("rdmad-io0"));
//   loop->Start();
//   loop->Post([&] {  // on the loop thread
//     auto id = loop->Watch(fd, EPOLLIN, [&](uint32_t events) { ... });
//     loop->RunAt(absl::Now() + absl::Seconds(1), [] { ... });
//   });
//   loop->Stop();  // runs the tasks still queued, then joins
#ifndef RDMAD_DAEMON_RUNTIME_EVENT_LOOP_H_
#define RDMAD_DAEMON_RUNTIME_EVENT_LOOP_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/spin_gate.h"
#include "common/unique_fd.h"

namespace rdmad::runtime {

// Runs on the loop thread with the epoll events of the watched fd.
using FdCallback = absl::AnyInvocable<void(uint32_t events)>;
using Task = absl::AnyInvocable<void()>;

// Something polled on every turn of the loop, for work that arrives
// without a file descriptor becoming readable (shared-memory rings, a CQ
// during its busy-poll window).
class Poller {
 public:
  virtual ~Poller() = default;
  // Does what work there is without blocking; true if it found any. While
  // pollers find work the loop keeps turning without sleeping, and for
  // `spin` (EventLoop::Options) after the last work found.
  virtual bool Poll() = 0;
  // The loop is about to sleep: arrange to be woken (a doorbell, an armed
  // CQ) and return false, or return true if work arrived meanwhile (the
  // loop then turns again instead of sleeping).
  virtual bool PrepareToSleep() = 0;
  // The loop woke up after sleeping.
  virtual void Woke() {}
};

class EventLoop {
 public:
  struct Options {
    // How long the loop keeps polling its pollers after the last work they
    // found before it sleeps in epoll_wait; not at all while the thread
    // shares its CPU with other runnable threads (common/spin_gate.h).
    absl::Duration spin = absl::Microseconds(50);
    // Spin also while the thread is being preempted: for a CPU of its own,
    // and for kernel threads that preempt it with the work it waits for
    // (soft-RoCE's).
    bool spin_when_preempted = false;
    // The time slice the loop's thread asks the scheduler for
    // (scheduler_slice.h); zero leaves the kernel's default.
    absl::Duration slice = absl::ZeroDuration();
  };

  static absl::StatusOr<std::unique_ptr<EventLoop>> Create(std::string name,
                                                           Options options);
  static absl::StatusOr<std::unique_ptr<EventLoop>> Create(std::string name) {
    return Create(std::move(name), Options());
  }
  // Stop().
  ~EventLoop();

  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  void Start();
  // Asks the loop to finish, runs every task still queued (and those they
  // queue), then joins the thread. Timers that did not fire are dropped.
  // From the loop thread itself it only asks. Idempotent.
  void Stop();

  // --- Loop thread only (or before Start). ---

  // Watches `fd` for `events` (EPOLLIN, EPOLLOUT...; level-triggered).
  // Returns the watch id. The fd stays owned by the caller, who must
  // Unwatch before closing it.
  absl::StatusOr<uint64_t> Watch(int fd, uint32_t events, FdCallback callback);
  absl::Status Rewatch(uint64_t id, uint32_t events);
  // Safe from inside any callback, including the watch's own.
  void Unwatch(uint64_t id);

  // Runs `task` at `when` (at once if past). Returns an id for CancelTimer.
  uint64_t RunAt(absl::Time when, Task task);
  // No-op for a timer that already ran or was cancelled.
  void CancelTimer(uint64_t id);

  // Polls `poller` on every turn until RemovePoller. Not owned.
  void AddPoller(Poller* poller);
  void RemovePoller(Poller* poller);

  // When the current turn of the loop began (or its thread last woke up):
  // a clock read saved for work that needs the time only to within a turn
  // (a few microseconds while busy), such as a deadline a timeout away.
  // A spinning loop polls several times per turn without reading the clock;
  // the first call after such a poll reads it.
  absl::Time turn_start() {
    if (turn_start_ == absl::InfinitePast()) turn_start_ = absl::Now();
    return turn_start_;
  }

  // --- Any thread. ---

  // Runs `task` on the loop thread soon, in posting order. Returns false
  // (and destroys `task` without running it) once the loop has finished.
  bool Post(Task task);
  bool InLoopThread() const {
    return loop_thread_id_.load(std::memory_order_relaxed) ==
           std::this_thread::get_id();
  }
  const std::string& name() const { return name_; }
  // The loop's thread id once started (for tests that count threads).
  std::thread::id thread_id() const { return loop_thread_id_.load(); }

 private:
  EventLoop(std::string name, Options options, UniqueFd epoll, UniqueFd wake);
  void Run();
  // Runs queued tasks; true if there were any.
  bool RunTasks();
  // Runs due timers.
  void RunTimers(absl::Time now);
  // When the next timer is due (InfiniteFuture: none).
  absl::Time NextTimer() const;
  bool PollAll();
  void Wake();

  const std::string name_;
  const Options options_;
  UniqueFd epoll_;
  UniqueFd wake_;  // eventfd
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> started_{false};
  std::atomic<std::thread::id> loop_thread_id_{};
  bool joined_ = false;

  // Loop thread only.
  absl::flat_hash_map<uint64_t, std::shared_ptr<FdCallback>> watches_;
  absl::flat_hash_map<uint64_t, int> watch_fds_;
  uint64_t next_watch_id_ = 1;
  std::map<std::pair<absl::Time, uint64_t>, Task> timers_;
  absl::flat_hash_map<uint64_t, absl::Time> timer_when_;
  uint64_t next_timer_id_ = 1;
  std::vector<Poller*> pollers_;
  absl::Time turn_start_ = absl::Now();
  // Closes the spin while another thread wants this one's CPU.
  SpinGate spin_gate_;
  // Whether to spin now (the gate, unless the options keep it open).
  bool SpinOpen(absl::Time now) const {
    return options_.spin_when_preempted || spin_gate_.open(now);
  }

  absl::Mutex mu_;
  std::vector<Task> tasks_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // !tasks_.empty(), kept for a look without the lock on every turn.
  std::atomic<bool> has_tasks_{false};
  // Set while the loop sleeps (or is about to) in epoll_wait: Post then
  // writes the eventfd; otherwise the loop will see the task anyway.
  std::atomic<bool> sleeping_{true};
};

// Runs `fn` on `loop` and returns its status: inline when called on the
// loop thread, else through Post, waiting at most `timeout`
// (DEADLINE_EXCEEDED then: a loop that runs no task for that long is
// wedged, and `fn` may still run later, so it must capture only what lives
// as long as the loop). FAILED_PRECONDITION if the loop has finished.
absl::Status RunOnLoop(EventLoop* loop, absl::AnyInvocable<absl::Status()> fn,
                       absl::Duration timeout = absl::Seconds(10));

}  // namespace rdmad::runtime

#endif  // RDMAD_DAEMON_RUNTIME_EVENT_LOOP_H_
