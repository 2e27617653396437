// The daemon's TCP listeners — metrics, data, peers — and the order they
// start in, so that one given an ephemeral port (port 0 in its address)
// never takes a port another one is configured for.
//
// The kernel hands out an ephemeral port from the same range that a fixed
// port may be chosen from, and a daemon restarted on the fixed ports of the
// one it replaces finds them freed a moment before. Once a listener is
// bound the kernel never hands its port out, so only a listener bound
// before a fixed one can take that fixed port. Hence:
//   1. metrics, then data: each, when ephemeral, starts again while its port
//      is one another listener is configured for (StartAvoidingPorts);
//   2. the Peer server last: gRPC cannot be asked to bind again, but by
//      then every fixed port it could take is bound.
//
// Example:
//   auto metrics = StartMetricsListener(config, daemon_metrics.collectable());
//   auto avoid = FixedPortsOfOthers(config, TcpListener::kData);
#ifndef RDMAD_DAEMON_TCP_LISTENERS_H_
#define RDMAD_DAEMON_TCP_LISTENERS_H_

#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "daemon/metrics/metrics_server.h"
#include "rdmad/v1/config.pb.h"

namespace prometheus {
class Collectable;
}  // namespace prometheus

namespace rdmad {

enum class TcpListener { kMetrics, kData, kPeer };

// The fixed (non-zero) ports configured for the daemon's TCP listeners
// other than `self`; metrics only when enabled.
absl::flat_hash_set<uint16_t> FixedPortsOfOthers(const v1::DaemonConfig& config,
                                                 TcpListener self);

// The metrics listener on config.metrics_listen() (when ephemeral, on a
// port no other listener is configured for). Call it only when metrics are
// enabled, and before the other listeners start.
absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> StartMetricsListener(
    const v1::DaemonConfig& config,
    std::shared_ptr<prometheus::Collectable> collectable);

}  // namespace rdmad

#endif  // RDMAD_DAEMON_TCP_LISTENERS_H_
