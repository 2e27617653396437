// ListeningTcpSockets: the TCP sockets of this process that listen, found
// through /proc/self/fd, and WakeListener, which makes a thread blocked in
// poll() or accept() on one of them return at once.
//
// Why: prometheus-cpp's Exposer (civetweb) stops by setting a flag that its
// accept thread reads only between polls of its listening socket, and those
// polls last up to 2 s (civetweb's SOCKET_TIMEOUT_QUANTUM, not settable):
// every daemon stop or metrics_listen reload with metrics on took up to 2 s
// longer than it had to. MetricsServer notes its listener's descriptor when
// it starts and wakes it before stopping.
//
// Example:
//   for (const ListeningSocket& s : ListeningTcpSockets()) {
//     if (s.port == 9471) WakeListener(s.fd, s.port);
//   }
#ifndef RDMAD_DAEMON_METRICS_LISTENING_SOCKETS_H_
#define RDMAD_DAEMON_METRICS_LISTENING_SOCKETS_H_

#include <cstdint>
#include <vector>

namespace rdmad::metrics {

struct ListeningSocket {
  int fd = -1;
  uint16_t port = 0;  // the local port, host order
};

// Every listening TCP socket (IPv4 or IPv6) open in this process, by
// ascending descriptor. Empty if /proc/self/fd cannot be read.
std::vector<ListeningSocket> ListeningTcpSockets();

// Shuts `fd`'s receiving side: the kernel moves a listening socket to
// CLOSE, wakes every poll() and accept() on it, and refuses new
// connections. The descriptor stays open for its owner to close. Does
// nothing unless `fd` is still a listening TCP socket on `port` (the
// owner may have closed it and the number been reused).
void WakeListener(int fd, uint16_t port);

}  // namespace rdmad::metrics

#endif  // RDMAD_DAEMON_METRICS_LISTENING_SOCKETS_H_
