// Small socket helpers for the TCP data transport: address parsing and
// resolution, listening, nonblocking connect, and socket tuning.
#ifndef RDMAD_DAEMON_TRANSPORT_TCP_SOCKET_UTIL_H_
#define RDMAD_DAEMON_TRANSPORT_TCP_SOCKET_UTIL_H_

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/host_port.h"
#include "common/unique_fd.h"

namespace rdmad::tcp {

using ::rdmad::HostPort;
using ::rdmad::IsWildcardHost;
using ::rdmad::JoinHostPort;

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const {
    return reinterpret_cast<const sockaddr*>(&storage);
  }
};

// Resolves host and port (numeric literals without any lookup; names through
// getaddrinfo, which may block: call it off event loops where that matters).
absl::StatusOr<SocketAddress> Resolve(const HostPort& address);

// "HOST:PORT" of a socket address.
std::string FormatAddress(const SocketAddress& address);
// Local / remote address of a connected or bound socket ("" on error).
std::string LocalAddressOf(int fd);
std::string RemoteAddressOf(int fd);
// The host part of a socket address as text ("192.0.2.7", "2001:db8::1";
// an IPv4-mapped IPv6 address as its IPv4 address), or "" for any other
// family (AF_UNSPEC: a peer that getpeername could not name).
std::string HostOf(const sockaddr_storage& address);
// Whether HostOf's `host` is a loopback address (127.0.0.0/8, ::1).
bool IsLoopbackHost(absl::string_view host);
// The port a socket is bound to (0 on error).
uint16_t LocalPortOf(int fd);

// Opens a nonblocking, close-on-exec TCP listener on `address`.
absl::StatusOr<UniqueFd> Listen(const HostPort& address, int backlog = 128);

// Most iovecs one sendmsg of a data connection gathers.
inline constexpr int kMaxIov = 64;
// Bytes one connection may read per readable event before its event loop
// moves on to the others (level-triggered epoll brings it back).
inline constexpr uint64_t kReadBudget = 16ull << 20;

// Socket options of every data connection.
struct SocketTuning {
  // SO_SNDBUF / SO_RCVBUF in bytes; 0 leaves the kernel's autotuning on
  // (setting them turns it off, and autotuning often does better).
  int buffer_bytes = 0;
  // TCP_USER_TIMEOUT: how long sent data may stay unacknowledged before the
  // kernel declares the connection dead (a peer host that vanished).
  int user_timeout_ms = 30000;
};

// TCP_NODELAY (frames are written whole, so Nagle only adds latency),
// keepalive, user timeout and buffer sizes. Best effort: failures of the
// optional settings are ignored.
void TuneSocket(int fd, const SocketTuning& tuning);

// Starts a nonblocking connect. `*in_progress` is set when the connection
// is not established yet (wait for EPOLLOUT, then ConnectResult).
absl::StatusOr<UniqueFd> StartConnect(const SocketAddress& address,
                                      bool* in_progress);
// The outcome of a nonblocking connect (SO_ERROR).
absl::Status ConnectResult(int fd);

}  // namespace rdmad::tcp

#endif  // RDMAD_DAEMON_TRANSPORT_TCP_SOCKET_UTIL_H_
