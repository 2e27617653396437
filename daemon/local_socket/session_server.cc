#include "daemon/local_socket/session_server.h"

#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/core/access_control.h"
#include "daemon/local_socket/unix_listener.h"
#include "spdlog/spdlog.h"

namespace rdmad::local_socket {

using session_wire::Message;
using session_wire::MessageType;

namespace {

// The supplementary groups of the process at the other end of `fd`, as the
// kernel recorded them at connect time (SO_PEERGROUPS, Linux 4.13+). Empty
// if the kernel cannot tell: then only the primary gid counts, which can
// deny access but never grant too much.
std::vector<uint32_t> PeerGroups(int fd) {
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 2; ++attempt) {
    socklen_t length = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &length) ==
        0) {
      groups.resize(length / sizeof(gid_t));
      return std::vector<uint32_t>(groups.begin(), groups.end());
    }
    if (errno != ERANGE) break;
    groups.resize(length / sizeof(gid_t) + 1);
  }
  return {};
}

// Bytes the daemon sent on `fd` that the client has not received yet
// (SIOCOUTQ: the socket's send-side memory still charged); -1 if unknown.
int UnreceivedBytes(int fd) {
  int queued = 0;
  if (::ioctl(fd, SIOCOUTQ, &queued) != 0) return -1;
  return queued;
}

// How often ended connections are looked at while some wait to drain.
constexpr int kReapIntervalMs = 1000;

}  // namespace

SessionLimits SessionLimits::ForFileLimit(uint64_t nofile) {
  SessionLimits limits;
  const auto at_least = [](uint64_t floor, uint64_t value) {
    return static_cast<size_t>(std::max(floor, value));
  };
  limits.max_sessions_per_uid = at_least(8, nofile / 8);
  limits.max_fds_in_flight_per_session = 16;
  limits.max_fds_in_flight_per_uid = at_least(16, nofile / 16);
  limits.max_fds_in_flight_total = at_least(64, nofile / 2);
  limits.max_pending_fds_per_session = 16;
  limits.max_pending_fds_per_uid = at_least(16, nofile / 16);
  return limits;
}

absl::StatusOr<SessionServer::MappableFd> SessionServer::RegionDescriptorFor(
    const core::Caller& caller, const core::Region& region) {
  if (region.memory().is_dmabuf()) {
    // Its owner holds the dma-buf already, and a mapping of the whole
    // descriptor would not start at the registered offset.
    return absl::FailedPreconditionError(absl::StrCat(
        region.Label(),
        " is a dma-buf its client registered: map (or use) "
        "the dma-buf that client holds; the daemon hands out only memory "
        "it allocated"));
  }
  const bool writable =
      region.owner() == core::RegionOwnerKind::kSession ||
      (core::PermittedBits(caller, region.acl()) & core::kLocalWrite) != 0;
  if (writable) return MappableFd{region.fd(), UniqueFd(), true};
  // Read only: a descriptor opened read-only, which the client can map but
  // never mprotect() writable. The memfd itself is read-write, so it is
  // opened again through /proc (memfds allow that) rather than handed out.
  const std::string path = absl::StrCat("/proc/self/fd/", region.fd());
  UniqueFd read_only(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!read_only) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("reopening region #", region.id(),
                            " read-only (", path, ")"));
  }
  const int raw = read_only.get();
  return MappableFd{raw, std::move(read_only), false};
}

SessionServer::SessionServer(std::string path, core::SessionTable* sessions,
                             core::RegionTable* regions, SessionLimits limits)
    : path_(std::move(path)),
      sessions_(sessions),
      regions_(regions),
      limits_(limits) {}

SessionServer::~SessionServer() { Stop(); }

absl::Status SessionServer::Start(uint32_t socket_mode) {
  RDMAD_ASSIGN_OR_RETURN(listen_fd_, ListenUnix(path_, SOCK_SEQPACKET,
                                                socket_mode));
  wake_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd_) return absl::ErrnoToStatus(errno, "eventfd");
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void SessionServer::Stop() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_.get(), &one, sizeof(one));
    thread_.join();
  }
  std::vector<int> fds;
  for (const auto& [fd, connection] : connections_) fds.push_back(fd);
  for (int fd : fds) Close(fd);
  if (listen_fd_) {
    listen_fd_.reset();
    ::unlink(path_.c_str());
  }
}

void SessionServer::Loop() {
  std::vector<pollfd> pfds;
  for (;;) {
    pfds.clear();
    pfds.push_back({wake_fd_.get(), POLLIN, 0});
    // While accept is backing off, the listener is not watched (fd -1 is
    // ignored by poll): its queued connection would wake us at once.
    const absl::Time now = absl::Now();
    const bool paused = backoff_.Paused(now);
    pfds.push_back({paused ? -1 : listen_fd_.get(), POLLIN, 0});
    bool draining = false;
    for (const auto& [fd, connection] : connections_) {
      // An ended connection is only watched for its close (POLLHUP is
      // always reported): what it sends is not read any more.
      pfds.push_back(
          {fd, static_cast<short>(connection.ended ? 0 : POLLIN), 0});
      draining |= connection.ended;
    }
    // Stop() wakes us through the eventfd; ended connections are looked at
    // now and then, until what they have in flight is gone; a pause of
    // accepting ends by timeout.
    int timeout_ms = draining ? kReapIntervalMs : -1;
    if (paused) {
      const int resume_ms = backoff_.PollTimeoutMs(now);
      timeout_ms = timeout_ms < 0 ? resume_ms : std::min(timeout_ms, resume_ms);
    }
    const int ready = ::poll(pfds.data(), pfds.size(), timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      spdlog::error("session socket poll failed: {}", std::strerror(errno));
      return;
    }
    if (pfds[0].revents != 0) return;
    if (pfds[1].revents & POLLIN) Accept();
    for (size_t i = 2; i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      auto it = connections_.find(pfds[i].fd);
      if (it == connections_.end()) continue;
      if (it->second.ended) {
        if ((pfds[i].revents & (POLLHUP | POLLERR)) != 0) Close(pfds[i].fd);
        continue;
      }
      // POLLHUP with data still queued: serve the data first; Receive then
      // reports the close.
      if (!Serve(it->second)) Close(pfds[i].fd);
    }
    if (draining) ReapEnded();
  }
}

void SessionServer::ReapEnded() {
  std::vector<int> drained;
  for (const auto& [fd, connection] : connections_) {
    if (connection.ended && UnreceivedBytes(fd) == 0) drained.push_back(fd);
  }
  for (int fd : drained) Close(fd);
}

size_t SessionServer::FdsInFlight() const {
  size_t total = 0;
  for (const auto& [fd, connection] : connections_) {
    total += connection.fds_in_flight;
  }
  return total;
}

size_t SessionServer::FdsInFlight(uint32_t uid) const {
  size_t total = 0;
  for (const auto& [fd, connection] : connections_) {
    if (connection.caller.uid == uid) total += connection.fds_in_flight;
  }
  return total;
}

void SessionServer::EndForAbuse(Connection& connection,
                                const absl::Status& why) {
  spdlog::warn("session {} (pid {} uid {}) ended: {}", connection.session_id,
               connection.caller.pid, connection.caller.uid,
               std::string(why.message()));
  // Best effort: the client may not be reading at all.
  (void)session_wire::Send(connection.socket.get(),
                           session_wire::ErrorMessage(why));
  sessions_->Close(connection.session_id);
  // Queues first, as Close does: their rings may name the session's
  // buffers, and nothing else would ever close them.
  if (queues_ != nullptr) queues_->EndSession(connection.session_id);
  regions_->FreeSession(connection.session_id);
  {
    absl::MutexLock lock(&mu_);
    passed_fds_.erase(connection.session_id);
  }
  connection.ended = true;
}

void SessionServer::Accept() {
  const int fd = ::accept4(listen_fd_.get(), nullptr, nullptr,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    if (error == EAGAIN || error == EINTR || error == ECONNABORTED) return;
    // Out of descriptors or memory (or anything else that may last): the
    // client stays queued, so pause rather than spin on a listener that
    // stays readable.
    backoff_.FailedAndLog(error, path_, "new clients");
    return;
  }
  backoff_.Succeeded();
  UniqueFd socket(fd);
  ucred cred{};
  socklen_t length = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    spdlog::warn("SO_PEERCRED failed: {}; refusing the client",
                 std::strerror(errno));
    return;
  }
  size_t open = 0;
  for (const auto& [other, connection] : connections_) {
    if (connection.caller.uid == cred.uid) ++open;
  }
  if (open >= limits_.max_sessions_per_uid) {
    const absl::Status refused = absl::ResourceExhaustedError(absl::StrCat(
        "uid ", cred.uid, " already has ", open,
        " sessions open with rdmad, "
        "the most one uid may: close some (each rdmad::Client is one)"));
    spdlog::warn("refusing a session to pid {}: {}", cred.pid,
                 std::string(refused.message()));
    (void)session_wire::Send(fd, session_wire::ErrorMessage(refused));
    return;
  }
  std::vector<uint32_t> groups = PeerGroups(fd);
  const auto opened = sessions_->Open(cred.uid, cred.gid, cred.pid, groups);
  Message hello;
  hello.type = MessageType::kHello;
  hello.a = opened.id;
  hello.text = opened.token;
  if (absl::Status s = session_wire::Send(fd, hello); !s.ok()) {
    spdlog::warn("could not greet new client pid {}: {}", cred.pid,
                 s.ToString());
    sessions_->Close(opened.id);
    return;
  }
  // Debug: every rdmactl call opens and ends a session.
  spdlog::debug("session {} opened: pid {} uid {} gid {}", opened.id,
                cred.pid, cred.uid, cred.gid);
  Connection connection;
  connection.session_id = opened.id;
  connection.caller =
      core::Caller{opened.id, cred.uid, cred.gid, cred.pid, std::move(groups)};
  connection.socket = std::move(socket);
  connections_.emplace(fd, std::move(connection));
}

bool SessionServer::Serve(Connection& connection) {
  const int fd = connection.socket.get();
  auto received = session_wire::Receive(fd, absl::ZeroDuration());
  if (!received.ok()) {
    if (absl::IsDeadlineExceeded(received.status())) return true;  // spurious
    if (!absl::IsUnavailable(received.status())) {
      spdlog::warn("session {}: {}; closing it", connection.session_id,
                   received.status().ToString());
    }
    return false;
  }
  Message& request = *received;
  absl::Status status;
  switch (request.type) {
    case MessageType::kGetFd:
      return SendRegionFd(connection, request.a);
    case MessageType::kGetQueueFd: {
      if (queues_ == nullptr || request.b > 2) {
        status = absl::InvalidArgumentError("no such queue descriptor");
        break;
      }
      auto found = queues_->Descriptor(connection.session_id, request.a,
                                       static_cast<ring::QueueFd>(request.b));
      if (!found.ok()) {
        status = found.status();
        break;
      }
      Message reply;
      reply.type = MessageType::kFd;
      reply.a = request.a;
      reply.b = found->size;
      // `found` holds the queue, so its descriptor stays open until sent.
      return SendFd(connection, reply, found->fd);
    }
    case MessageType::kPassFd: {
      if (!request.fd.valid()) {
        status = absl::InvalidArgumentError(
            "PASS_FD arrived without a descriptor attached (SCM_RIGHTS)");
        break;
      }
      uint64_t token = 0;
      {
        absl::MutexLock lock(&mu_);
        size_t uid_pending = 0;
        for (const auto& [other_fd, other] : connections_) {
          if (other.caller.uid != connection.caller.uid) continue;
          auto it = passed_fds_.find(other.session_id);
          if (it != passed_fds_.end()) uid_pending += it->second.size();
        }
        auto& pending = passed_fds_[connection.session_id];
        if (pending.size() >= limits_.max_pending_fds_per_session) {
          status = absl::ResourceExhaustedError(absl::StrCat(
              "this session already passed ", pending.size(),
              " descriptors that were never registered: call RegisterBuffer "
              "(or RegisterDmabuf) for them first"));
        } else if (uid_pending >= limits_.max_pending_fds_per_uid) {
          status = absl::ResourceExhaustedError(absl::StrCat(
              "the sessions of uid ", connection.caller.uid, " already passed ",
              uid_pending,
              " descriptors that were never registered, the "
              "most one uid may: call RegisterBuffer for them first"));
        } else {
          token = next_fd_token_++;
          pending.emplace(token, std::move(request.fd));
        }
      }
      if (!status.ok()) break;
      Message reply;
      reply.type = MessageType::kPassFdAck;
      reply.a = token;
      return session_wire::Send(fd, reply).ok();
    }
    default:
      status = absl::InvalidArgumentError(absl::StrCat(
          "unknown session request type ", static_cast<int>(request.type)));
  }
  return session_wire::Send(fd, session_wire::ErrorMessage(status)).ok();
}

bool SessionServer::SendRegionFd(Connection& connection, uint64_t region_id) {
  const int fd = connection.socket.get();
  // A mapping needs read; it is writable only where write is granted too
  // (a session's own buffers always are).
  auto region = regions_->FindForUse(
      connection.caller, core::RegionKey{region_id, ""}, core::kLocalRead);
  if (!region.ok()) {
    return session_wire::Send(fd, session_wire::ErrorMessage(region.status()))
        .ok();
  }
  auto memory = RegionDescriptorFor(connection.caller, **region);
  if (!memory.ok()) {
    return session_wire::Send(fd, session_wire::ErrorMessage(memory.status()))
        .ok();
  }
  Message reply;
  reply.type = MessageType::kFd;
  reply.a = (*region)->id();
  reply.b = (*region)->mapped_size();
  reply.text = memory->writable ? "rw" : "r";
  return SendFd(connection, reply, memory->fd);
}

bool SessionServer::SendFd(Connection& connection, const Message& reply,
                           int attached) {
  const int fd = connection.socket.get();
  // Everything sent so far has been received once the send queue is empty;
  // until then, count conservatively.
  if (UnreceivedBytes(fd) == 0) connection.fds_in_flight = 0;
  if (connection.fds_in_flight >= limits_.max_fds_in_flight_per_session) {
    EndForAbuse(connection,
                absl::ResourceExhaustedError(absl::StrCat(
                    "this session asked for ", connection.fds_in_flight + 1,
                    " region descriptors without receiving the ones sent "
                    "(at most ",
                    limits_.max_fds_in_flight_per_session,
                    " may be in flight): the session is ended; receive each "
                    "descriptor before asking for the next")));
    return true;
  }
  if (FdsInFlight(connection.caller.uid) >= limits_.max_fds_in_flight_per_uid) {
    EndForAbuse(connection,
                absl::ResourceExhaustedError(absl::StrCat(
                    "the sessions of uid ", connection.caller.uid, " have ",
                    FdsInFlight(connection.caller.uid),
                    " region descriptors in flight that were never received "
                    "(at most ",
                    limits_.max_fds_in_flight_per_uid,
                    " per uid): this session is ended; receive each "
                    "descriptor before asking for the next")));
    return true;
  }
  if (FdsInFlight() >= limits_.max_fds_in_flight_total) {
    return session_wire::Send(
               fd, session_wire::ErrorMessage(absl::ResourceExhaustedError(
                       "rdmad has too many region descriptors in flight to "
                       "clients that have not received them: try again "
                       "shortly")))
        .ok();
  }
  if (!session_wire::Send(fd, reply, attached).ok()) return false;
  ++connection.fds_in_flight;
  return true;
}

void SessionServer::Close(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  const Connection& connection = it->second;
  if (connection.ended) {
    connections_.erase(it);
    return;
  }
  sessions_->Close(connection.session_id);
  // Queues first: their rings may name the session's buffers.
  if (queues_ != nullptr) queues_->EndSession(connection.session_id);
  const size_t freed = regions_->FreeSession(connection.session_id);
  {
    absl::MutexLock lock(&mu_);
    passed_fds_.erase(connection.session_id);
  }
  spdlog::debug("session {} (pid {}) ended; freed {} buffer(s)",
                connection.session_id, connection.caller.pid, freed);
  connections_.erase(it);
}

absl::StatusOr<UniqueFd> SessionServer::TakePassedFd(uint64_t session_id,
                                                     uint64_t token) {
  absl::MutexLock lock(&mu_);
  auto session = passed_fds_.find(session_id);
  if (session != passed_fds_.end()) {
    auto it = session->second.find(token);
    if (it != session->second.end()) {
      UniqueFd fd = std::move(it->second);
      session->second.erase(it);
      return fd;
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "no descriptor with token ", token,
      " was passed on this session's socket: pass the memfd first (the "
      "client library's RegisterBuffer does this)"));
}

}  // namespace rdmad::local_socket
