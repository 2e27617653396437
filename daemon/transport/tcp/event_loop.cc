#include "daemon/transport/tcp/event_loop.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace rdmad::tcp {
namespace {

constexpr uint64_t kWakeTag = 0;
constexpr int kMaxEvents = 128;
// Upper bound of one epoll_wait even with nothing due, so that a missed
// wake-up can never stall the loop for long.
constexpr absl::Duration kMaxSleep = absl::Seconds(1);

}  // namespace

absl::StatusOr<std::unique_ptr<EventLoop>> EventLoop::Create(
    std::string name, Delegate* delegate) {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll) return absl::ErrnoToStatus(errno, "epoll_create1");
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake) return absl::ErrnoToStatus(errno, "eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeTag;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, wake.get(), &ev) != 0) {
    return absl::ErrnoToStatus(errno, "epoll_ctl(eventfd)");
  }
  return std::unique_ptr<EventLoop>(
      new EventLoop(std::move(name), delegate, std::move(epoll), std::move(wake)));
}

EventLoop::EventLoop(std::string name, Delegate* delegate, UniqueFd epoll,
                     UniqueFd wake)
    : name_(std::move(name)),
      delegate_(delegate),
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
  if (thread_.joinable()) thread_.join();
  joined_ = true;
}

absl::Status EventLoop::Add(int fd, uint32_t events, uint64_t tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    return absl::ErrnoToStatus(errno, "epoll_ctl(ADD)");
  }
  return absl::OkStatus();
}

absl::Status EventLoop::Modify(int fd, uint32_t events, uint64_t tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) {
    return absl::ErrnoToStatus(errno, "epoll_ctl(MOD)");
  }
  return absl::OkStatus();
}

void EventLoop::Remove(int fd) {
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
}

void EventLoop::Post(absl::AnyInvocable<void()> task) {
  bool was_empty;
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;  // `task` is destroyed on return
    was_empty = tasks_.empty();
    tasks_.push_back(std::move(task));
  }
  // One wake-up per batch of tasks is enough: the loop takes them all.
  if (was_empty) Wake();
}

void EventLoop::Wake() {
  const uint64_t one = 1;
  // EAGAIN (counter saturated) still leaves the eventfd readable.
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof(one));
}

bool EventLoop::InLoopThread() const {
  return loop_thread_id_.load() == std::this_thread::get_id();
}

void EventLoop::RunTasks() {
  std::vector<absl::AnyInvocable<void()>> tasks;
  {
    absl::MutexLock lock(&mu_);
    tasks.swap(tasks_);
  }
  for (auto& task : tasks) task();
}

void EventLoop::Run() {
  loop_thread_id_.store(std::this_thread::get_id());
  // Thread names are limited to 15 characters.
  ::pthread_setname_np(::pthread_self(), name_.substr(0, 15).c_str());
  epoll_event events[kMaxEvents];
  absl::Time next_tick = absl::Now();
  while (!stop_.load()) {
    const absl::Time now = absl::Now();
    const absl::Duration sleep =
        std::min(kMaxSleep, std::max(absl::ZeroDuration(), next_tick - now));
    // Round up so a deadline is never checked a moment too early and then
    // slept past.
    const int timeout_ms = static_cast<int>(
        absl::ToInt64Milliseconds(sleep + absl::Microseconds(999)));
    const int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, timeout_ms);
    if (n < 0 && errno != EINTR) {
      spdlog::error("{}: epoll_wait: {}", name_, std::strerror(errno));
    }
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kWakeTag) {
        uint64_t count;
        [[maybe_unused]] ssize_t r = ::read(wake_.get(), &count, sizeof(count));
        continue;
      }
      delegate_->OnEvent(events[i].data.u64, events[i].events);
    }
    RunTasks();
    next_tick = delegate_->OnTick(absl::Now());
  }
  RunTasks();
  delegate_->OnStop();
  std::vector<absl::AnyInvocable<void()>> dropped;
  {
    absl::MutexLock lock(&mu_);
    finished_ = true;
    dropped.swap(tasks_);
  }
}

}  // namespace rdmad::tcp
