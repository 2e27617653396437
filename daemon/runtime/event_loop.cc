#include "daemon/runtime/event_loop.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/serving_thread.h"
#include "daemon/runtime/scheduler_slice.h"
#include "daemon/runtime/turn_batch.h"
#include "spdlog/spdlog.h"

namespace rdmad::runtime {
namespace {

constexpr uint64_t kWakeId = 0;
constexpr int kMaxEvents = 128;
// Upper bound of one sleep even with nothing due, so that a lost wake-up
// can never stall the loop for long.
constexpr absl::Duration kMaxSleep = absl::Seconds(1);
// While pollers keep the loop spinning, how often it still looks at its
// file descriptors. epoll_wait is a system call, most of what an idle turn
// costs (and the time a spinning engine takes to notice a ring entry grows
// with the turn); the pollers' work needs none, so sockets are looked at
// every few microseconds instead of every turn: every
// kFdCheckWhileSpinning, or kFdCheckCostFactor times what the last look
// cost when that is longer, so that looking takes at most a tenth of a
// spinning loop's time. Under an emulated CPU (the lab's TCG) a system call
// costs tens of microseconds, and a loop that looked every 5 us spent most
// of its spin inside epoll_wait, noticing ring entries and completions that
// much later. Never less often than kMaxFdCheckWhileSpinning (sockets of
// the TCP transport wait for it).
constexpr absl::Duration kFdCheckWhileSpinning = absl::Microseconds(5);
constexpr int64_t kFdCheckCostFactor = 10;
constexpr absl::Duration kMaxFdCheckWhileSpinning = absl::Microseconds(100);
// While spinning with nothing found, the pollers are polled this many times
// per turn before the loop reads the clock and looks at its tasks, timers
// and descriptors again. Reading the clock (absl::Now) costs as much as an
// idle poll, and the longer an idle turn, the later a spinning engine sees
// a new ring entry; 16 polls are a microsecond or two.
constexpr int kPollsPerTurnWhileSpinning = 16;

}  // namespace

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create(std::string name,
                                                             Options options) {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll) return absl::ErrnoToStatus(errno, "epoll_create1");
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake) return absl::ErrnoToStatus(errno, "eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, wake.get(), &ev) != 0) {
    return absl::ErrnoToStatus(errno, "epoll_ctl(eventfd)");
  }
  return std::unique_ptr<EventLoop>(new EventLoop(
      std::move(name), options, std::move(epoll), std::move(wake)));
}

EventLoop::EventLoop(std::string name, Options options, UniqueFd epoll,
                     UniqueFd wake)
    : name_(std::move(name)),
      options_(options),
      epoll_(std::move(epoll)),
      wake_(std::move(wake)) {}

EventLoop::~EventLoop() { Stop(); }

void EventLoop::Start() {
  if (started_.exchange(true)) return;
  thread_ = std::thread([this] { Run(); });
}

void EventLoop::Stop() {
  stop_.store(true);
  Wake();
  if (InLoopThread() || joined_) return;
  if (thread_.joinable()) {
    thread_.join();
  } else {
    // Never started: still run what was queued, as a started loop would.
    while (RunTasks()) {
    }
    absl::MutexLock lock(&mu_);
    finished_ = true;
  }
  joined_ = true;
}

absl::StatusOr<uint64_t> EventLoop::Watch(int fd, uint32_t events,
                                          FdCallback callback) {
  const uint64_t id = next_watch_id_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    return absl::ErrnoToStatus(errno, "epoll_ctl(ADD)");
  }
  watches_.emplace(id, std::make_shared<FdCallback>(std::move(callback)));
  watch_fds_.emplace(id, fd);
  return id;
}

absl::Status EventLoop::Rewatch(uint64_t id, uint32_t events) {
  auto it = watch_fds_.find(id);
  if (it == watch_fds_.end()) {
    return absl::NotFoundError("no such watch");
  }
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, it->second, &ev) != 0) {
    return absl::ErrnoToStatus(errno, "epoll_ctl(MOD)");
  }
  return absl::OkStatus();
}

void EventLoop::Unwatch(uint64_t id) {
  auto it = watch_fds_.find(id);
  if (it == watch_fds_.end()) return;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second, nullptr);
  watch_fds_.erase(it);
  // The callback may be running right now (it unwatches itself): the
  // dispatcher holds its own reference until it returns.
  watches_.erase(id);
}

uint64_t EventLoop::RunAt(absl::Time when, Task task) {
  const uint64_t id = next_timer_id_++;
  timers_.emplace(std::make_pair(when, id), std::move(task));
  timer_when_.emplace(id, when);
  return id;
}

void EventLoop::CancelTimer(uint64_t id) {
  auto it = timer_when_.find(id);
  if (it == timer_when_.end()) return;
  timers_.erase({it->second, id});
  timer_when_.erase(it);
}

void EventLoop::AddPoller(Poller* poller) { pollers_.push_back(poller); }

void EventLoop::RemovePoller(Poller* poller) {
  pollers_.erase(std::remove(pollers_.begin(), pollers_.end(), poller),
                 pollers_.end());
}

bool EventLoop::Post(Task task) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return false;  // `task` is destroyed on return
    tasks_.push_back(std::move(task));
    has_tasks_.store(true, std::memory_order_relaxed);
  }
  // Only a sleeping loop needs the eventfd: a running one takes the task on
  // its next turn (see Run for why this cannot miss).
  if (sleeping_.load()) Wake();
  return true;
}

void EventLoop::Wake() {
  const uint64_t one = 1;
  // EAGAIN (counter saturated) still leaves the eventfd readable.
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof(one));
}

bool EventLoop::RunTasks() {
  // A hint read without the lock (Post sets it under the lock): a task it
  // misses is run on the next turn, and never slept on (Run looks at tasks_
  // under the lock before it sleeps).
  if (!has_tasks_.load(std::memory_order_relaxed)) return false;
  std::vector<Task> tasks;
  {
    absl::MutexLock lock(&mu_);
    tasks.swap(tasks_);
    has_tasks_.store(false, std::memory_order_relaxed);
  }
  for (Task& task : tasks) task();
  return !tasks.empty();
}

void EventLoop::RunTimers(absl::Time now) {
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    auto node = timers_.extract(timers_.begin());
    timer_when_.erase(node.key().second);
    node.mapped()();
  }
}

absl::Time EventLoop::NextTimer() const {
  return timers_.empty() ? absl::InfiniteFuture()
                         : timers_.begin()->first.first;
}

bool EventLoop::PollAll() {
  bool work = false;
  // By index: a poller may add or remove pollers.
  for (size_t i = 0; i < pollers_.size(); ++i) work |= pollers_[i]->Poll();
  return work;
}

void EventLoop::Run() {
  loop_thread_id_.store(std::this_thread::get_id());
  // What this thread runs serves many clients: work of milliseconds that
  // need not happen here goes elsewhere (common/serving_thread.h).
  MarkServingThread();
  if (options_.slice > absl::ZeroDuration()) {
    if (absl::Status s = RequestSchedulerSlice(options_.slice); !s.ok()) {
      spdlog::info("{}: keeps the scheduler's default time slice: {}", name_,
                   std::string(s.message()));
    }
  }
  // Thread names are limited to 15 characters.
  ::pthread_setname_np(::pthread_self(), name_.substr(0, 15).c_str());
  sleeping_.store(false);
  epoll_event events[kMaxEvents];
  absl::Time spin_until = absl::InfinitePast();
  absl::Time next_fd_check = absl::InfinitePast();
  absl::Duration fd_check_every = kFdCheckWhileSpinning;
  bool slept = false;
  while (!stop_.load()) {
    absl::Time now = absl::Now();
    turn_start_ = now;
    int timeout_ms = 0;
    // absl::Now() is the wall clock: if it is set back, a spin_until (or
    // next_fd_check) far ahead would keep the loop spinning blind; one
    // further ahead than it can legitimately be counts as due.
    const auto ahead = [now](absl::Time t, absl::Duration most) {
      return now < t && t - now <= most;
    };
    // A poller found work as the loop was about to sleep, and armed no
    // wake-up: this turn must not sleep, spin or no spin.
    bool awake = false;
    if (!ahead(spin_until, options_.spin) && !pollers_.empty()) {
      // About to sleep: pollers arm their wake-ups; one that found work
      // meanwhile keeps the loop awake.
      for (size_t i = 0; i < pollers_.size(); ++i) {
        awake |= pollers_[i]->PrepareToSleep();
      }
      if (awake && SpinOpen(now)) spin_until = now + options_.spin;
    }
    const bool spinning = ahead(spin_until, options_.spin);
    if (!spinning && !awake) {
      // Publish that we may sleep before the last look at the task queue:
      // a Post that lands after that look sees `sleeping_` and wakes us.
      sleeping_.store(true);
      bool have_tasks;
      {
        absl::MutexLock lock(&mu_);
        have_tasks = !tasks_.empty();
      }
      if (!have_tasks) {
        // The timers as they are now: pollers arm theirs in Poll and
        // PrepareToSleep, after this turn's look at them (a stalled
        // queue's 100 us look slept a whole kMaxSleep otherwise).
        const absl::Duration sleep = std::min(
            kMaxSleep, std::max(absl::ZeroDuration(), NextTimer() - now));
        // Round up so a timer is never checked a moment early and then
        // slept past.
        timeout_ms = static_cast<int>(
            absl::ToInt64Milliseconds(sleep + absl::Microseconds(999)));
      }
    }
    int n = 0;
    if (!spinning || !ahead(next_fd_check, fd_check_every)) {
      n = ::epoll_wait(epoll_.get(), events, kMaxEvents, timeout_ms);
      if (sleeping_.load()) {
        sleeping_.store(false);
        slept = timeout_ms != 0;
      }
      if (n < 0 && errno != EINTR) {
        spdlog::error("{}: epoll_wait: {}", name_, std::strerror(errno));
      }
      if (timeout_ms != 0) {
        turn_start_ = now = absl::Now();
      } else {
        // A look that did not sleep: what it cost sets the next one.
        const absl::Time after = absl::Now();
        fd_check_every =
            std::clamp(kFdCheckCostFactor * (after - now),
                       kFdCheckWhileSpinning, kMaxFdCheckWhileSpinning);
        turn_start_ = now = after;
      }
      next_fd_check = now + fd_check_every;
    }
    if (slept) {
      slept = false;
      for (size_t i = 0; i < pollers_.size(); ++i) pollers_[i]->Woke();
    }
    // What this turn's callbacks, tasks and timers publish to other
    // threads (completions on a client's ring) goes out once, at the end
    // of the turn (turn_batch.h).
    std::optional<TurnBatch::Scope> batch(std::in_place);
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kWakeId) {
        uint64_t count;
        [[maybe_unused]] ssize_t r = ::read(wake_.get(), &count, sizeof(count));
        continue;
      }
      auto it = watches_.find(id);
      if (it == watches_.end()) continue;  // unwatched earlier in this batch
      std::shared_ptr<FdCallback> callback = it->second;
      (*callback)(events[i].events);
    }
    RunTasks();
    // Timers due by `now` (read after any sleep): one that comes due during
    // this turn runs on the next, a few microseconds later.
    RunTimers(now);
    batch.reset();
    bool work = PollAll();
    for (int i = 1; !work && spinning && i < kPollsPerTurnWhileSpinning &&
                    !has_tasks_.load(std::memory_order_relaxed) &&
                    !stop_.load(std::memory_order_relaxed);
         ++i) {
      turn_start_ = absl::InfinitePast();  // read again if a poller asks
      work = PollAll();
    }
    if (work) {
      const absl::Time after = absl::Now();
      // Busy-poll for more only on a CPU this thread has to itself
      // (common/spin_gate.h).
      if (!options_.spin_when_preempted) spin_gate_.Check(after);
      if (SpinOpen(after)) spin_until = after + options_.spin;
    }
  }
  // Tasks queued before or during shutdown still run (they close channels
  // and fail their operations), including those they queue in turn.
  for (;;) {
    if (!RunTasks()) {
      absl::MutexLock lock(&mu_);
      if (tasks_.empty()) {
        finished_ = true;
        break;
      }
    }
  }
  timers_.clear();
  timer_when_.clear();
  watches_.clear();
  watch_fds_.clear();
}

absl::Status RunOnLoop(EventLoop* loop, absl::AnyInvocable<absl::Status()> fn,
                       absl::Duration timeout) {
  if (loop->InLoopThread()) return fn();
  struct Result {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    absl::Status status ABSL_GUARDED_BY(mu);
  };
  auto result = std::make_shared<Result>();
  if (!loop->Post([result, fn = std::move(fn)]() mutable {
        absl::Status status = fn();
        absl::MutexLock lock(&result->mu);
        result->status = std::move(status);
        result->done = true;
      })) {
    return absl::FailedPreconditionError(
        absl::StrCat("event loop ", loop->name(), " has stopped"));
  }
  absl::MutexLock lock(&result->mu);
  if (!result->mu.AwaitWithTimeout(absl::Condition(&result->done), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "event loop ", loop->name(), " ran no task for ",
        absl::FormatDuration(timeout)));
  }
  return result->status;
}

}  // namespace rdmad::runtime
