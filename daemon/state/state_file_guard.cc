#include "daemon/state/state_file_guard.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/size.h"
#include "daemon/core/shm_segment.h"
#include "spdlog/spdlog.h"

namespace rdmad::state {

absl::StatusOr<std::unique_ptr<StateFileGuard>> StateFileGuard::Start(
    int dir_fd, std::string path) {
  UniqueFd inotify(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("inotify_init1, to watch the sizes of the files "
                            "in state_dir ",
                            path, " (fs.inotify.max_user_instances)"));
  }
  // The directory itself, by its descriptor: the path might name another
  // directory by now.
  const std::string self = absl::StrCat("/proc/self/fd/", dir_fd);
  if (::inotify_add_watch(inotify.get(), self.c_str(), IN_MODIFY | IN_ONLYDIR) <
      0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("inotify_add_watch of state_dir ", path,
                            " (fs.inotify.max_user_watches)"));
  }
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake) return absl::ErrnoToStatus(errno, "eventfd");
  return std::unique_ptr<StateFileGuard>(new StateFileGuard(
      dir_fd, std::move(path), std::move(inotify), std::move(wake)));
}

StateFileGuard::StateFileGuard(int dir_fd, std::string path, UniqueFd inotify,
                               UniqueFd wake)
    : dir_fd_(dir_fd),
      path_(std::move(path)),
      inotify_(std::move(inotify)),
      wake_(std::move(wake)),
      thread_([this] { Run(); }) {}

StateFileGuard::~StateFileGuard() {
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
  thread_.join();
}

void StateFileGuard::Watch(const std::string& file, uint64_t mapped_size,
                           std::string label) {
  {
    absl::MutexLock lock(&mu_);
    watched_[file] = Watched{mapped_size, std::move(label)};
  }
  // Whatever happened before the watch began (a descriptor handed out by
  // an earlier run is still open somewhere).
  Check(file);
}

void StateFileGuard::Unwatch(const std::string& file) {
  absl::MutexLock lock(&mu_);
  watched_.erase(file);
}

void StateFileGuard::Run() {
  ::pthread_setname_np(::pthread_self(), "rdmad-sizeguard");
  // Room for many events at once; each is a header and a short name.
  alignas(inotify_event) char buffer[16 * 1024];
  for (;;) {
    pollfd fds[2] = {{wake_.get(), POLLIN, 0}, {inotify_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error(
          "state_dir {}: poll failed ({}); file sizes are no longer "
          "watched until the next start",
          path_, std::strerror(errno));
      return;
    }
    if (fds[0].revents != 0) return;
    std::vector<std::string> touched;
    bool overflowed = false;
    for (;;) {
      const ssize_t n = ::read(inotify_.get(), buffer, sizeof(buffer));
      if (n <= 0) break;  // EAGAIN: all read
      for (const char* p = buffer; p < buffer + n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(p);
        if ((event->mask & IN_Q_OVERFLOW) != 0) overflowed = true;
        if (event->len > 0) {
          std::string name(event->name);  // NUL-padded
          if (absl::EndsWith(name, ".mem")) touched.push_back(std::move(name));
        }
        p += sizeof(inotify_event) + event->len;
      }
    }
    // Events were lost: any file may have grown.
    if (overflowed) {
      CheckAll();
      continue;
    }
    for (const std::string& file : touched) Check(file);
  }
}

void StateFileGuard::CheckAll() {
  std::vector<std::string> files;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [file, watched] : watched_) files.push_back(file);
  }
  for (const std::string& file : files) Check(file);
}

void StateFileGuard::Check(const std::string& file) {
  Watched watched;
  {
    absl::MutexLock lock(&mu_);
    auto it = watched_.find(file);
    if (it == watched_.end()) return;  // not a live region's (yet)
    watched = it->second;
  }
  // O_NONBLOCK: the directory is rdmad's alone, but opening must never
  // hang whatever the name turned out to be.
  UniqueFd fd(::openat(dir_fd_, file.c_str(),
                       O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return;  // freed meanwhile
  auto excess = core::CutFileBackTo(fd.get(), watched.mapped_size);
  if (!excess.ok()) {
    spdlog::error("state_dir {}: {} ({}): {}", path_, watched.label, file,
                  std::string(excess.status().message()));
    return;
  }
  if (!excess->has_value()) return;
  // A client that keeps growing a file must not flood the log: the first
  // cut and every 1000th are logged as warnings.
  const uint64_t n = cuts_.fetch_add(1) + 1;
  spdlog::log(n % 1000 == 1 ? spdlog::level::warn : spdlog::level::debug,
              "state_dir {}: the file of {} ({}) grew to {} holding {} of "
              "memory, through a descriptor a client holds; cut back to the "
              "region's {} ({} such cuts so far)",
              path_, watched.label, file, HumanSize((*excess)->size),
              HumanSize((*excess)->allocated), HumanSize(watched.mapped_size),
              n);
}

}  // namespace rdmad::state
