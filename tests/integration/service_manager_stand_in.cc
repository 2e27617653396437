#include "tests/integration/service_manager_stand_in.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace rdmad::testing {
namespace {

// The most descriptors one message may carry (the kernel's SCM_MAX_FD).
constexpr size_t kMaxFdsPerMessage = 253;
// The stand-in's own marker (Settle); systemd knows no such variable.
constexpr absl::string_view kMarker = "X_STAND_IN_MARKER=";

}  // namespace

absl::StatusOr<std::unique_ptr<ServiceManagerStandIn>>
ServiceManagerStandIn::Start(const std::string& dir) {
  std::unique_ptr<ServiceManagerStandIn> manager(new ServiceManagerStandIn());
  manager->path_ = dir + "/notify.sock";
  manager->socket_.reset(
      ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!manager->socket_) return absl::ErrnoToStatus(errno, "socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (manager->path_.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError("notify socket path too long");
  }
  std::memcpy(addr.sun_path, manager->path_.c_str(), manager->path_.size() + 1);
  if (::bind(manager->socket_.get(), reinterpret_cast<sockaddr*>(&addr),
             sizeof(addr)) != 0) {
    return absl::ErrnoToStatus(errno, "bind " + manager->path_);
  }
  manager->wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!manager->wake_) return absl::ErrnoToStatus(errno, "eventfd");
  manager->receiver_ = std::thread([m = manager.get()] { m->ReceiveLoop(); });
  return manager;
}

ServiceManagerStandIn::~ServiceManagerStandIn() {
  if (receiver_.joinable()) {
    const uint64_t one = 1;
    (void)::write(wake_.get(), &one, sizeof(one));
    receiver_.join();
  }
}

void ServiceManagerStandIn::ReceiveLoop() {
  std::vector<char> buffer(64 * 1024);
  std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage));
  for (;;) {
    pollfd fds[2] = {{socket_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    for (;;) {
      iovec iov{buffer.data(), buffer.size()};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      const ssize_t n = ::recvmsg(socket_.get(), &msg, MSG_CMSG_CLOEXEC);
      if (n < 0) break;  // EAGAIN: all read
      std::vector<UniqueFd> received;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
           c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
          received.emplace_back(fd);
        }
      }
      Handle(std::string(buffer.data(), static_cast<size_t>(n)),
             std::move(received));
    }
  }
}

void ServiceManagerStandIn::Handle(const std::string& message,
                                   std::vector<UniqueFd> fds) {
  bool store = false;
  bool remove = false;
  bool ready = false;
  std::string name = "stored";  // systemd's default FDNAME
  uint64_t marker = 0;
  for (absl::string_view line : absl::StrSplit(message, '\n')) {
    if (absl::ConsumePrefix(&line, kMarker))
      (void)absl::SimpleAtoi(line, &marker);
    if (line == "FDSTORE=1") store = true;
    if (line == "FDSTOREREMOVE=1") remove = true;
    if (line == "READY=1") ready = true;
    if (absl::ConsumePrefix(&line, "FDNAME=")) name = std::string(line);
  }
  absl::MutexLock lock(&mu_);
  if (store) {
    for (UniqueFd& fd : fds) store_.emplace(name, std::move(fd));
  }
  if (remove) store_.erase(name);
  if (ready) ++ready_;
  markers_handled_ = std::max(markers_handled_, marker);
}

void ServiceManagerStandIn::Settle() const {
  uint64_t marker;
  {
    absl::MutexLock lock(&mu_);
    marker = ++markers_sent_;
  }
  UniqueFd sender(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  const std::string message = absl::StrCat(kMarker, marker);
  if (!sender ||
      ::sendto(sender.get(), message.data(), message.size(), 0,
               reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0) {
    return;  // the store is read as it stands
  }
  absl::MutexLock lock(&mu_);
  auto handled = [this, marker]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return markers_handled_ >= marker;
  };
  mu_.AwaitWithTimeout(absl::Condition(&handled), absl::Seconds(30));
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ServiceManagerStandIn::Launch(
    const std::vector<std::string>& argv, const std::string& log_path) {
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls.
  std::vector<UniqueFd> passed;
  std::vector<std::string> names;
  // systemd, too, reads what the last run sent before it starts the next.
  Settle();
  {
    absl::MutexLock lock(&mu_);
    ready_ = 0;
    for (const auto& [name, fd] : store_) {
      passed.emplace_back(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
      names.push_back(name);
    }
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const absl::string_view var = *e;
    if (absl::StartsWith(var, "NOTIFY_SOCKET=") ||
        absl::StartsWith(var, "LISTEN_")) {
      continue;
    }
    env.emplace_back(var);
  }
  env.push_back("NOTIFY_SOCKET=" + path_);
  if (!passed.empty()) {
    env.push_back(absl::StrCat("LISTEN_FDS=", passed.size()));
    env.push_back("LISTEN_FDNAMES=" + absl::StrJoin(names, ":"));
  }
  // The shell's $$ is the pid rdmad keeps across exec: LISTEN_PID names
  // the daemon itself, as systemd sets it.
  std::vector<std::string> args = {"/bin/sh", "-c",
                                   "export LISTEN_PID=$$; exec \"$0\" \"$@\""};
  args.insert(args.end(), argv.begin(), argv.end());
  std::vector<char*> c_args;
  for (auto& a : args) c_args.push_back(a.data());
  c_args.push_back(nullptr);
  std::vector<char*> c_env;
  for (auto& e : env) c_env.push_back(e.data());
  c_env.push_back(nullptr);
  std::vector<int> sources;
  for (const UniqueFd& fd : passed) sources.push_back(fd.get());
  const int count = static_cast<int>(sources.size());

  UniqueFd log(::open(log_path.c_str(),
                      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log) return absl::ErrnoToStatus(errno, "open " + log_path);
  const pid_t pid = ::fork();
  if (pid < 0) return absl::ErrnoToStatus(errno, "fork");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(log.get(), 1);
    ::dup2(log.get(), 2);
    // Out of the way of 3..3+count first, then into place (dup2 clears
    // FD_CLOEXEC on the copy).
    for (int i = 0; i < count; ++i) {
      sources[i] = ::fcntl(sources[i], F_DUPFD_CLOEXEC, 3 + count);
    }
    for (int i = 0; i < count; ++i) ::dup2(sources[i], 3 + i);
    ::execve(c_args[0], c_args.data(), c_env.data());
    ::_exit(127);
  }
  return ChildProcess::Own(pid);
}

bool ServiceManagerStandIn::WaitReady(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ready_ > 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
}

std::vector<std::string> ServiceManagerStandIn::StoredNames() const {
  Settle();
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, fd] : store_) names.push_back(name);
  return names;
}

void ServiceManagerStandIn::Replace(const std::string& name, UniqueFd fd) {
  absl::MutexLock lock(&mu_);
  store_.erase(name);
  store_.emplace(name, std::move(fd));
}

UniqueFd ServiceManagerStandIn::Duplicate(const std::string& name) const {
  Settle();
  absl::MutexLock lock(&mu_);
  auto it = store_.find(name);
  if (it == store_.end()) return UniqueFd();
  return UniqueFd(::fcntl(it->second.get(), F_DUPFD_CLOEXEC, 0));
}

}  // namespace rdmad::testing
