#include "tests/integration/daemon_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rdmad/client.h"

namespace rdmad::testing {
namespace {

// The state letter of /proc/.../stat ("PID (COMM) STATE ..."); 0 if
// unreadable (the thread is gone).
char TaskState(const std::filesystem::path& stat_path) {
  std::ifstream stat(stat_path);
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return 0;
  return line[paren + 2];
}

// Binds a TCP socket to 127.0.0.1:`port` (0: the kernel picks one) without
// SO_REUSEADDR, so that it succeeds only where no socket of any state (a
// listener, a connection, TIME_WAIT) has the port, and closes it again.
// Returns the port bound; 0 if none.
int BindOnLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  int bound = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    bound = ntohs(addr.sin_port);
  }
  ::close(fd);
  return bound;
}

}  // namespace

int FreeLoopbackPort() {
  // Below the kernel's ephemeral range, so that no connect() elsewhere on
  // the host is given the port while the test holds it unbound (between a
  // daemon's stop and its restart, or before a server binds it). Only
  // another test's random pick can collide, and the probe bind catches a
  // port that is in use now.
  int first_ephemeral = 32768;
  {
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 0;
    if (range >> low && low > 0) first_ephemeral = low;
  }
  constexpr int kLowest = 10000;
  if (first_ephemeral - kLowest >= 1000) {
    std::random_device seed;
    std::mt19937 pick(seed());
    std::uniform_int_distribution<int> in_range(kLowest, first_ephemeral - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      const int port = in_range(pick);
      if (BindOnLoopback(port) == port) return port;
    }
  }
  // No room below the ephemeral range: the kernel's pick.
  return BindOnLoopback(0);
}

std::optional<std::vector<std::string>> FdTargets(pid_t pid) {
  const std::string dir = absl::StrCat("/proc/", pid, "/fd");
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return std::nullopt;
  std::vector<std::string> targets;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char target[256] = {};
    const ssize_t len = ::readlink(absl::StrCat(dir, "/", e->d_name).c_str(),
                                   target, sizeof(target) - 1);
    targets.emplace_back(target, len > 0 ? static_cast<size_t>(len) : 0);
  }
  ::closedir(d);
  return targets;
}

int OpenFds(pid_t pid) {
  auto targets = FdTargets(pid);
  return targets ? static_cast<int>(targets->size()) : -1;
}

bool WaitAllThreadsStopped(pid_t pid, absl::Duration timeout) {
  const std::filesystem::path tasks =
      std::filesystem::path("/proc") / std::to_string(pid) / "task";
  const absl::Time give_up = absl::Now() + timeout;
  do {
    bool all = true;
    std::error_code error;
    for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
      const char state = TaskState(task.path() / "stat");
      if (state != 'T' && state != 't' && state != 0) {
        all = false;
        break;
      }
    }
    if (!error && all) return true;
    absl::SleepFor(absl::Milliseconds(5));
  } while (absl::Now() < give_up);
  return false;
}

namespace {

std::string FromEnv(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

// In the child between fork and exec: die with the test process, so that a
// crashed test never leaves daemons behind.
[[noreturn]] void ExecChild(const std::vector<std::string>& argv) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

}  // namespace

std::string RdmadBinary() { return FromEnv("RDMAD_BINARY", RDMAD_BINARY_PATH); }
std::string RdmactlBinary() {
  return FromEnv("RDMACTL_BINARY", RDMACTL_BINARY_PATH);
}

TempDir::TempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "rdmad-test-XXXXXX").string();
  char* made = ::mkdtemp(pattern.data());
  path_ = made != nullptr ? made : "";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::string& input, absl::Duration timeout) {
  ProcessResult result;
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 ||
      ::pipe2(err, O_CLOEXEC) != 0) {
    result.err = "pipe failed";
    return result;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ExecChild(argv);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  // Feed stdin from this thread while reading; inputs in tests are small
  // enough for the pipe, but do it incrementally anyway.
  size_t written = 0;
  int in_fd = in[1];
  ::fcntl(in_fd, F_SETFL, O_NONBLOCK);
  if (input.empty()) {
    ::close(in_fd);
    in_fd = -1;
  }
  const absl::Time deadline = absl::Now() + timeout;
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd pfds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0},
                      {in_fd, POLLOUT, 0}};
    ::poll(pfds, in_fd >= 0 ? 3 : 2,
           static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    for (int i = 0; i < 2; ++i) {
      if (pfds[i].fd < 0 || pfds[i].revents == 0) continue;
      const ssize_t n = ::read(pfds[i].fd, buf, sizeof(buf));
      if (n > 0) {
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(pfds[i].fd);
        (i == 0 ? out[0] : err[0]) = -1;
        --open_fds;
      }
    }
    if (in_fd >= 0 && pfds[2].revents != 0) {
      const ssize_t n =
          ::write(in_fd, input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) written = input.size();
      if (written == input.size()) {
        ::close(in_fd);
        in_fd = -1;
      }
    }
  }
  if (in_fd >= 0) ::close(in_fd);
  if (out[0] >= 0) ::close(out[0]);
  if (err[0] >= 0) ::close(err[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv, const std::string& log_path) {
  const int log = ::open(log_path.c_str(),
                         O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return absl::ErrnoToStatus(errno, "open " + log_path);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    return absl::ErrnoToStatus(errno, "fork");
  }
  if (pid == 0) {
    ::dup2(log, 1);
    ::dup2(log, 2);
    ExecChild(argv);
  }
  ::close(log);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid));
}

std::unique_ptr<ChildProcess> ChildProcess::Own(pid_t pid) {
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid));
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("not running");
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      return status;
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError("process did not exit in time");
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
}

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(
    const std::string& dir, const std::string& name, DaemonOptions options) {
  std::unique_ptr<DaemonProcess> daemon(new DaemonProcess());
  daemon->name_ = name;
  daemon->socket_ = absl::StrCat(dir, "/", name, ".sock");
  daemon->log_path_ = absl::StrCat(dir, "/", name, ".log");
  daemon->options_ = std::move(options);
  if (daemon->options_.config.has_value()) {
    const std::string path = absl::StrCat(dir, "/", name, ".conf");
    std::ofstream file(path);
    file << *daemon->options_.config;
    if (!file.flush()) {
      return absl::InternalError(absl::StrCat("cannot write ", path));
    }
    auto& args = daemon->options_.extra_args;
    args.insert(args.begin(), {"--config", path});
  }
  // On loopback, a fixed port outside the ephemeral range rather than the
  // kernel's pick, so that Restart() finds it free again (see
  // FreeLoopbackPort); another test taking it first costs a new pick.
  if (daemon->options_.peer_listen != "127.0.0.1:0") {
    if (absl::Status s = daemon->Launch(daemon->options_.peer_listen);
        !s.ok()) {
      return s;
    }
    return daemon;
  }
  absl::Status launched = absl::UnavailableError("no free loopback port");
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int port = FreeLoopbackPort();
    if (port == 0) break;
    launched = daemon->Launch(absl::StrCat("127.0.0.1:", port));
    if (launched.ok()) return daemon;
    if (!absl::StrContains(launched.message(), "is in use by")) break;
  }
  return launched;
}

absl::Status DaemonProcess::Launch(const std::string& peer_listen) {
  std::vector<std::string> argv = options_.command_prefix;
  for (const std::string& arg :
       {RdmadBinary(), std::string("--socket"), socket_,
        std::string("--peer_listen"), peer_listen, std::string("--transport"),
        options_.transport, std::string("--log_level"), options_.log_level}) {
    argv.push_back(arg);
  }
  argv.insert(argv.end(), options_.extra_args.begin(),
              options_.extra_args.end());
  auto child = ChildProcess::Spawn(argv, log_path_);
  if (!child.ok()) return child.status();
  child_ = *std::move(child);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  absl::Status last = absl::UnavailableError("not started");
  while (absl::Now() < deadline) {
    int status = 0;
    if (::waitpid(child_->pid(), &status, WNOHANG) == child_->pid()) {
      child_.reset();
      return absl::InternalError(
          absl::StrCat("rdmad ", name_, " exited at start:\n", LogTail()));
    }
    auto client = Client::Connect({.socket_path = socket_,
                                   .timeout = absl::Seconds(2)});
    if (client.ok()) {
      auto status_reply = (*client)->GetStatus();
      // Another daemon may own the socket already: only ours counts.
      if (status_reply.ok() &&
          status_reply->pid == static_cast<uint32_t>(child_->pid())) {
        peer_address_ = status_reply->peer_address;
        return absl::OkStatus();
      }
      last = status_reply.ok() ? absl::UnavailableError(absl::StrCat(
                                     "socket answered by pid ",
                                     status_reply->pid))
                               : status_reply.status();
    } else {
      last = client.status();
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "rdmad ", name_, " did not answer in time: ", last.ToString(), "\n",
      LogTail()));
}

DaemonProcess::~DaemonProcess() { (void)Stop(); }

absl::StatusOr<int> DaemonProcess::Stop() {
  if (child_ == nullptr || !child_->running()) {
    return absl::FailedPreconditionError("not running");
  }
  child_->Signal(SIGTERM);
  auto status = child_->Wait(absl::Seconds(10));
  if (!status.ok()) {
    child_->Signal(SIGKILL);
    (void)child_->Wait(absl::Seconds(10));
  }
  child_.reset();
  return status;
}

void DaemonProcess::Kill() {
  if (child_ == nullptr) return;
  child_->Signal(SIGKILL);
  (void)child_->Wait(absl::Seconds(10));
  child_.reset();
}

absl::Status DaemonProcess::Restart() {
  if (child_ != nullptr) (void)Stop();
  // Same port as before, so peers that knew the old address find it again.
  return Launch(peer_address_.empty() ? options_.peer_listen : peer_address_);
}

bool DaemonProcess::Pause() {
  if (child_ == nullptr) return false;
  child_->Signal(SIGSTOP);
  return WaitAllThreadsStopped(child_->pid(), absl::Seconds(10));
}

void DaemonProcess::Resume() {
  if (child_ != nullptr) child_->Signal(SIGCONT);
}

pid_t DaemonProcess::pid() const { return child_ ? child_->pid() : -1; }

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string DaemonProcess::Log() const { return ReadTextFile(log_path_); }

int DataPort(const DaemonProcess& daemon) {
  const std::string log = daemon.Log();
  std::smatch m;
  // Not across the line's end: the next line's time has colons too.
  if (std::regex_search(log, m,
                        std::regex("TCP data listener on [^ \n]*:([0-9]+)"))) {
    return std::stoi(m[1]);
  }
  return 0;
}

std::string DaemonProcess::LogTail() const {
  std::string all = Log();
  return all.size() > 4000 ? all.substr(all.size() - 4000) : all;
}

}  // namespace rdmad::testing
