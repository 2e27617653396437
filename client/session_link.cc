#include "client/session_link.h"

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"

namespace rdmad::client_internal {
namespace {

// Connects to the daemon's session socket, `socket_path` + ".session".
// Errors name `socket_path`, the path the user gave.
absl::StatusOr<UniqueFd> ConnectSessionSocket(const std::string& socket_path) {
  const std::string path = session_wire::SessionSocketPath(socket_path);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "socket path too long: ", socket_path, " (at most ",
        sizeof(addr.sun_path) - 1 - (path.size() - socket_path.size()),
        " bytes)"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) return absl::ErrnoToStatus(errno, "socket(AF_UNIX)");
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr),
                sizeof(addr)) != 0) {
    const int error = errno;
    if (error == EACCES || error == EPERM) {
      // The daemon runs; this user may not open its socket (it is 0660,
      // group rdma, where the package installs it).
      return absl::PermissionDeniedError(absl::StrCat(
          "no permission to connect to rdmad at ", socket_path, ": ",
          std::strerror(error),
          ". Its sockets are open to the group rdma: add this user to it "
          "(sudo usermod -aG rdma $USER), then log in again"));
    }
    return absl::UnavailableError(absl::StrCat(
        "cannot connect to rdmad at ", socket_path, ": ",
        std::strerror(error),
        ". Is rdmad running (systemctl status rdmad)? For a daemon on "
        "another socket set RDMAD_SOCKET (or ClientOptions::socket_path; "
        "rdmactl --socket)"));
  }
  return fd;
}

// Forks of this process that made a child, counted in the child (by a
// pthread_atfork handler, registered with the first link): a link compares
// the count with the one when it was opened, without a system call.
std::atomic<uint64_t> fork_count{0};

uint64_t ForkCount() {
  static const bool registered = [] {
    ::pthread_atfork(nullptr, nullptr,
                     [] { fork_count.fetch_add(1, std::memory_order_relaxed); });
    return true;
  }();
  (void)registered;
  return fork_count.load(std::memory_order_relaxed);
}

}  // namespace

SessionLink::SessionLink(ClientOptions options)
    : options_(std::move(options)), pid_(::getpid()), forks_(ForkCount()) {}

SessionLink::~SessionLink() {
  // gRPC's threads do not exist in a forked child, and tearing its channel
  // down there waits for them forever: the child keeps it (the process
  // exits without it).
  if (Forked()) new std::shared_ptr<v1::Local::Stub>(std::move(stub_));
}

bool SessionLink::Forked() const {
  return fork_count.load(std::memory_order_relaxed) != forks_;
}

absl::Status SessionLink::ForkedError() const {
  return absl::FailedPreconditionError(absl::StrCat(
      "this rdmad Client was connected by process ", pid_,
      ", and this is a child it forked (pid ", ::getpid(),
      "): its session, queues and buffers are the parent's, which still "
      "uses them. Connect a new Client in the child (buffer memory stays "
      "readable here)"));
}

absl::StatusOr<std::unique_ptr<SessionLink>> SessionLink::Open(
    ClientOptions options) {
  std::unique_ptr<SessionLink> link(new SessionLink(std::move(options)));
  {
    absl::MutexLock lock(&link->mu_);
    RDMAD_RETURN_IF_ERROR(link->OpenLocked());
  }
  return link;
}

absl::Duration SessionLink::CallBudget() const {
  return std::min(options_.timeout, options_.deadline - absl::Now());
}

absl::Status SessionLink::OpenLocked() {
  if (CallBudget() <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(
        "the time given for this work (its deadline) has passed");
  }
  RDMAD_ASSIGN_OR_RETURN(
      UniqueFd socket,
      ConnectSessionSocket(options_.socket_path));
  RDMAD_ASSIGN_OR_RETURN(session_wire::Message hello,
                         session_wire::Receive(socket.get(), CallBudget()));
  if (hello.type != session_wire::MessageType::kHello || hello.text.empty()) {
    return absl::InternalError(
        "rdmad did not greet this client with a session: version mismatch?");
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // A new channel per session: the old one may sit in a reconnect backoff
  // left from the daemon that went away.
  stub_ = v1::Local::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("unix:", options_.socket_path),
      grpc::InsecureChannelCredentials(), args));
  socket_ = std::move(socket);
  session_id_ = hello.a;
  token_ = std::move(hello.text);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return absl::OkStatus();
}

bool SessionLink::ClosedLocked() const {
  if (!socket_) return true;
  pollfd pfd{socket_.get(), POLLRDHUP, 0};
  // The daemon never writes unasked, so only a hang-up (or an error) can
  // make the socket ready here.
  return ::poll(&pfd, 1, 0) > 0 &&
         (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

absl::Status SessionLink::ReopenIfClosedLocked() {
  if (!ClosedLocked()) return absl::OkStatus();
  socket_.reset();
  if (absl::Status s = OpenLocked(); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat(s.message(),
                                     " (rdmad closed this client's session: "
                                     "it stopped or restarted)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SessionLink::Call> SessionLink::Prepare(
    grpc::ClientContext& context) {
  if (Forked()) return ForkedError();
  absl::MutexLock lock(&mu_);
  RDMAD_RETURN_IF_ERROR(ReopenIfClosedLocked());
  context.set_deadline(absl::ToChronoTime(absl::Now() + CallBudget()));
  context.AddMetadata(session_wire::kSessionMetadataKey, token_);
  return Call{stub_, generation()};
}

absl::StatusOr<SessionLink::Call> SessionLink::PrepareIn(
    grpc::ClientContext& context, uint64_t generation) {
  // FAILED_PRECONDITION too: what the child would free or close there is
  // the parent's.
  if (Forked()) return ForkedError();
  absl::MutexLock lock(&mu_);
  if (generation != this->generation() || ClosedLocked()) {
    return absl::FailedPreconditionError(
        "the client's session this belonged to is over (rdmad stopped or "
        "restarted), and what it owned with it");
  }
  context.set_deadline(absl::ToChronoTime(absl::Now() + CallBudget()));
  context.AddMetadata(session_wire::kSessionMetadataKey, token_);
  return Call{stub_, generation};
}

absl::StatusOr<uint64_t> SessionLink::Refresh() {
  if (Forked()) return ForkedError();
  absl::MutexLock lock(&mu_);
  RDMAD_RETURN_IF_ERROR(ReopenIfClosedLocked());
  return generation();
}

bool SessionLink::DaemonClosed() const {
  absl::MutexLock lock(&mu_);
  return ClosedLocked();
}

absl::StatusOr<session_wire::Message> SessionLink::Ask(
    const session_wire::Message& request, int fd_to_send,
    uint64_t generation) {
  if (Forked()) return ForkedError();
  absl::MutexLock lock(&mu_);
  if (generation != this->generation() || !socket_) {
    return absl::FailedPreconditionError(
        "rdmad restarted during this call, and what it referred to belonged "
        "to the session before: do it again");
  }
  RDMAD_RETURN_IF_ERROR(
      session_wire::Send(socket_.get(), request, fd_to_send));
  auto reply = session_wire::Receive(socket_.get(), CallBudget());
  if (!reply.ok()) {
    if (absl::IsUnavailable(reply.status())) {
      return absl::UnavailableError(
          "rdmad closed this client's session (it stopped or restarted); "
          "the next call opens a new one");
    }
    return reply.status();
  }
  if (reply->type == session_wire::MessageType::kError) {
    return session_wire::StatusFromError(*reply);
  }
  return reply;
}

uint64_t SessionLink::session_id() const {
  absl::MutexLock lock(&mu_);
  return session_id_;
}

}  // namespace rdmad::client_internal
