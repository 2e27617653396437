#include "daemon/metrics/listening_sockets.h"

#include <dirent.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "daemon/transport/tcp/socket_util.h"

namespace rdmad::metrics {
namespace {

// The local port of `fd` if it is a listening TCP socket.
std::optional<uint16_t> ListeningPort(int fd) {
  int value = 0;
  socklen_t len = sizeof(value);
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &len) != 0 ||
      value != SOCK_STREAM) {
    return std::nullopt;  // not a socket, or not a stream one
  }
  len = sizeof(value);
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &len) != 0 ||
      value == 0) {
    return std::nullopt;
  }
  // 0 for a Unix socket (or an error): no listening TCP socket has it.
  const uint16_t port = tcp::LocalPortOf(fd);
  if (port == 0) return std::nullopt;
  return port;
}

}  // namespace

std::vector<ListeningSocket> ListeningTcpSockets() {
  std::vector<ListeningSocket> found;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return found;
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd < 0 || fd == own) continue;
    if (std::optional<uint16_t> port = ListeningPort(static_cast<int>(fd))) {
      found.push_back({static_cast<int>(fd), *port});
    }
  }
  ::closedir(dir);
  std::sort(found.begin(), found.end(),
            [](const ListeningSocket& a, const ListeningSocket& b) {
              return a.fd < b.fd;
            });
  return found;
}

void WakeListener(int fd, uint16_t port) {
  if (ListeningPort(fd) != port) return;
  ::shutdown(fd, SHUT_RD);
}

}  // namespace rdmad::metrics
