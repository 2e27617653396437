#include "daemon/local_socket/local_listener.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/local_socket/unix_listener.h"
#include "grpcpp/server.h"
#include "grpcpp/server_posix.h"
#include "spdlog/spdlog.h"

namespace rdmad::local_socket {
namespace {

// Whether descriptor number `fd` still holds the socket with `inode`. The
// number belongs to gRPC (or, once gRPC closed it, to whoever opened the
// next file), so it is looked at through /proc rather than used: a
// read-only look at a name, never an operation on someone else's
// descriptor.
bool SameSocket(int fd, ino_t inode) {
  char link[64];
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  const ssize_t n = ::readlink(path.c_str(), link, sizeof(link) - 1);
  if (n <= 0) return false;
  return absl::string_view(link, static_cast<size_t>(n)) ==
         absl::StrCat("socket:[", inode, "]");
}

}  // namespace

LocalListener::LocalListener(std::string path, LocalListenerOptions options)
    : path_(std::move(path)), options_(options) {}

LocalListener::~LocalListener() { Stop(); }

absl::Status LocalListener::Start(grpc::Server* server, uint32_t mode) {
  server_ = server;
  RDMAD_ASSIGN_OR_RETURN(listen_fd_, ListenUnix(path_, SOCK_STREAM, mode));
  wake_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd_) return absl::ErrnoToStatus(errno, "eventfd");
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void LocalListener::Stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_.get(), &one, sizeof(one));
    thread_.join();
  }
  if (listen_fd_) {
    listen_fd_.reset();
    ::unlink(path_.c_str());
  }
}

void LocalListener::Loop() {
  for (;;) {
    pollfd pfds[2] = {{wake_fd_.get(), POLLIN, 0},
                      {listen_fd_.get(), POLLIN, 0}};
    // Wait on the listener only while accepting is not paused; the pause
    // is the only timeout (Stop() wakes us through the eventfd).
    const absl::Time now = absl::Now();
    const bool paused = backoff_.Paused(now);
    const int timeout_ms = backoff_.PollTimeoutMs(now);
    const int ready = ::poll(pfds, paused ? 1 : 2, timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      spdlog::error("Local socket poll failed: {}", std::strerror(errno));
      return;
    }
    if (pfds[0].revents != 0) return;
    if (!paused && (pfds[1].revents & POLLIN) != 0) Accept();
  }
}

void LocalListener::Refuse(const ConnectionCredentials& who,
                           absl::string_view why) {
  if (++refused_ % 1000 == 1) {
    spdlog::warn(
        "Local socket: refused a connection from pid {} uid {}: {} "
        "({} refused so far)",
        who.pid, who.uid, std::string(why), refused_);
  }
}

void LocalListener::Accept() {
  for (;;) {
    UniqueFd accepted(::accept4(listen_fd_.get(), nullptr, nullptr,
                                SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!accepted) {
      const int error = errno;
      if (error == EINTR || error == ECONNABORTED) continue;
      if (runtime::AcceptBackoff::ShortOfResources(error)) {
        // The client stays queued: pause rather than spin on a listener
        // that stays readable.
        backoff_.FailedAndLog(error, path_, "new clients");
      }
      return;  // EAGAIN: all taken
    }
    backoff_.Succeeded();
    ucred cred{};
    socklen_t length = sizeof(cred);
    if (::getsockopt(accepted.get(), SOL_SOCKET, SO_PEERCRED, &cred, &length) !=
        0) {
      spdlog::warn("Local socket: SO_PEERCRED failed: {}; refusing the client",
                   std::strerror(errno));
      continue;
    }
    const ConnectionCredentials who{cred.pid, cred.uid, cred.gid};
    struct stat st;
    if (::fstat(accepted.get(), &st) != 0) continue;

    int handed = -1;
    {
      absl::MutexLock lock(&mu_);
      Sweep();
      size_t open = 0;
      for (const auto& [fd, entry] : entries_) {
        if (entry.alive && entry.credentials.uid == who.uid) ++open;
      }
      if (open >= options_.max_connections_per_uid) {
        Refuse(who, absl::StrCat("uid ", who.uid, " already has ", open,
                                 " Local connections open, the most one uid "
                                 "may"));
        continue;  // closes it
      }
      // A number an earlier connection had is not handed out again until
      // its grace has passed: find the lowest one without an entry.
      UniqueFd chosen;
      if (!entries_.contains(accepted.get())) {
        chosen = std::move(accepted);
      } else {
        int from = accepted.get() + 1;
        for (;;) {
          UniqueFd copy(::fcntl(accepted.get(), F_DUPFD_CLOEXEC, from));
          if (!copy) break;  // out of descriptors: refused below
          if (!entries_.contains(copy.get())) {
            chosen = std::move(copy);
            break;
          }
          from = copy.get() + 1;
        }
        accepted.reset();
      }
      if (!chosen) {
        Refuse(who, "no descriptor number is free for it");
        continue;
      }
      Entry entry;
      entry.credentials = who;
      entry.inode = st.st_ino;
      handed = chosen.release();
      entries_[handed] = entry;
    }
    // gRPC owns the descriptor from here and closes it when the connection
    // ends; its calls name it "fd:<handed>".
    grpc::AddInsecureChannelFromFd(server_, handed);
  }
}

void LocalListener::Sweep() {
  const absl::Time now = absl::Now();
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& entry = it->second;
    if (entry.alive && !SameSocket(it->first, entry.inode)) {
      entry.alive = false;
      entry.closed = now;
    }
    if (!entry.alive && now - entry.closed > options_.reuse_grace) {
      entries_.erase(it++);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<ConnectionCredentials> LocalListener::CredentialsOf(
    absl::string_view grpc_peer) const {
  int fd = -1;
  if (absl::StartsWith(grpc_peer, "fd:")) {
    if (!absl::SimpleAtoi(grpc_peer.substr(3), &fd)) fd = -1;
  }
  if (fd >= 0) {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(fd);
    if (it != entries_.end()) return it->second.credentials;
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "the connection this call came on (", grpc_peer,
      ") is not one rdmad's Local socket accepted, so the daemon does not "
      "know who is calling: connect to the Local socket itself"));
}

size_t LocalListener::OpenConnections(uint32_t uid) const {
  absl::MutexLock lock(&mu_);
  size_t open = 0;
  for (const auto& [fd, entry] : entries_) {
    if (entry.alive && entry.credentials.uid == uid &&
        SameSocket(fd, entry.inode)) {
      ++open;
    }
  }
  return open;
}

}  // namespace rdmad::local_socket
