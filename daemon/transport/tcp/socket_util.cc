#include "daemon/transport/tcp/socket_util.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rdmad::tcp {
namespace {

// An address of `family` as text; inet_ntop cannot fail for AF_INET or
// AF_INET6 with a buffer this large.
std::string InetText(int family, const void* address) {
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(family, address, text, sizeof(text));
  return text;
}

std::string FormatSockaddr(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return JoinHostPort(InetText(AF_INET, &in->sin_addr), ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return JoinHostPort(InetText(AF_INET6, &in6->sin6_addr),
                        ntohs(in6->sin6_port));
  }
  return "";
}

}  // namespace

absl::StatusOr<SocketAddress> Resolve(const HostPort& address) {
  SocketAddress out;
  const std::string host = IsWildcardHost(address.host) && address.host.empty()
                               ? std::string("0.0.0.0")
                               : address.host;
  auto* in = reinterpret_cast<sockaddr_in*>(&out.storage);
  if (::inet_pton(AF_INET, host.c_str(), &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(address.port);
    out.length = sizeof(sockaddr_in);
    return out;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
  if (::inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(address.port);
    out.length = sizeof(sockaddr_in6);
    return out;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = absl::StrCat(address.port);
  const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot resolve host '", host, "': ", ::gai_strerror(rc)));
  }
  std::memcpy(&out.storage, found->ai_addr, found->ai_addrlen);
  out.length = found->ai_addrlen;
  ::freeaddrinfo(found);
  return out;
}

std::string FormatAddress(const SocketAddress& address) {
  return FormatSockaddr(address.get());
}

std::string LocalAddressOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  return FormatSockaddr(reinterpret_cast<sockaddr*>(&ss));
}

std::string RemoteAddressOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  return FormatSockaddr(reinterpret_cast<sockaddr*>(&ss));
}

std::string HostOf(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    return InetText(AF_INET, &in->sin_addr);
  }
  if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    // ::ffff:a.b.c.d is a.b.c.d: one peer, whichever way it came.
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      return InetText(AF_INET, &in6->sin6_addr.s6_addr[12]);
    }
    return InetText(AF_INET6, &in6->sin6_addr);
  }
  return "";
}

bool IsLoopbackHost(absl::string_view host) {
  return absl::StartsWith(host, "127.") || host == "::1";
}

uint16_t LocalPortOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  }
  if (ss.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  }
  return 0;
}

absl::StatusOr<UniqueFd> Listen(const HostPort& address, int backlog) {
  HostPort bind_to = address;
  if (bind_to.host.empty() || bind_to.host == "[::]") bind_to.host = "::";
  auto resolved = Resolve(bind_to);
  if (!resolved.ok()) return resolved.status();
  UniqueFd fd(::socket(resolved->storage.ss_family,
                       SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return absl::ErrnoToStatus(errno, "socket");
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (resolved->storage.ss_family == AF_INET6) {
    // "::" should accept IPv4 too, whatever the system default.
    const int zero = 0;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  }
  if (::bind(fd.get(), resolved->get(), resolved->length) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("bind ", JoinHostPort(address.host, address.port)));
  }
  if (::listen(fd.get(), backlog) != 0) {
    return absl::ErrnoToStatus(errno, "listen");
  }
  return fd;
}

void TuneSocket(int fd, const SocketTuning& tuning) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  const int idle = 30, interval = 10, count = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  if (tuning.user_timeout_ms > 0) {
    const unsigned timeout = static_cast<unsigned>(tuning.user_timeout_ms);
    ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout, sizeof(timeout));
  }
  if (tuning.buffer_bytes > 0) {
    // The kernel caps these at net.core.{w,r}mem_max (and doubles them for
    // its own bookkeeping).
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &tuning.buffer_bytes,
                 sizeof(tuning.buffer_bytes));
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &tuning.buffer_bytes,
                 sizeof(tuning.buffer_bytes));
  }
}

absl::StatusOr<UniqueFd> StartConnect(const SocketAddress& address,
                                      bool* in_progress) {
  UniqueFd fd(::socket(address.storage.ss_family,
                       SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return absl::ErrnoToStatus(errno, "socket");
  *in_progress = false;
  if (::connect(fd.get(), address.get(), address.length) != 0) {
    if (errno != EINPROGRESS) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("connect to ", FormatAddress(address)));
    }
    *in_progress = true;
  }
  return fd;
}

absl::Status ConnectResult(int fd) {
  int error = 0;
  socklen_t len = sizeof(error);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) {
    return absl::ErrnoToStatus(errno, "getsockopt(SO_ERROR)");
  }
  if (error != 0) return absl::ErrnoToStatus(error, "connect");
  return absl::OkStatus();
}

}  // namespace rdmad::tcp
