// MetricsServer: serves a DaemonMetrics in the Prometheus text format at
// http://HOST:PORT/metrics (prometheus-cpp's Exposer, an embedded civetweb
// HTTP server with its own small thread pool).
//
// Example:
//   auto server = MetricsServer::Start("127.0.0.1:9471", metrics.collectable());
//   if (!server.ok()) ...            // e.g. the port is in use
//   (*server)->address();            // "127.0.0.1:9471" (the real port if 0)
//   server->reset();                 // stops listening, joins its threads
//
// Thread-safety: Start and destruction from one thread; the HTTP threads
// only read the collectable.
#ifndef RDMAD_DAEMON_METRICS_METRICS_SERVER_H_
#define RDMAD_DAEMON_METRICS_METRICS_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

namespace rdmad::metrics {

class MetricsServer {
 public:
  // Listens on `listen` (HOST:PORT; port 0 = any free port). UNAVAILABLE if
  // it cannot bind, INVALID_ARGUMENT for a malformed address.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen,
      std::shared_ptr<prometheus::Collectable> collectable);
  // Stops the HTTP server and joins its threads, at once (not after
  // civetweb's next 2-second poll: listening_sockets.h).
  ~MetricsServer();

  // HOST:PORT as bound.
  const std::string& address() const { return address_; }
  // The port bound (the real one if `listen` asked for 0).
  uint16_t port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  // Held here so it outlives the exposer's weak reference.
  std::shared_ptr<prometheus::Collectable> collectable_;
  std::string address_;
  uint16_t port_ = 0;
  // civetweb's listening sockets, woken before it is stopped.
  std::vector<int> listener_fds_;
};

}  // namespace rdmad::metrics

#endif  // RDMAD_DAEMON_METRICS_METRICS_SERVER_H_
