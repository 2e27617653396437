#include "daemon/tcp_listeners.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/host_port.h"
#include "daemon/config/config_file.h"
#include "daemon/startup/ephemeral_port.h"

namespace rdmad {
namespace {

// The port in `address`, if it parses (the config was validated; a port
// that does not parse is reported by the listener that uses it).
std::optional<uint16_t> PortOf(const std::string& address) {
  auto parsed = ParseHostPort(address, AddressUse::kListen);
  if (!parsed.ok()) return std::nullopt;
  return parsed->port;
}

}  // namespace

absl::flat_hash_set<uint16_t> FixedPortsOfOthers(const v1::DaemonConfig& config,
                                                 TcpListener self) {
  std::vector<std::pair<TcpListener, const std::string*>> listeners = {
      {TcpListener::kPeer, &config.peer_listen()}};
  if (!config.data_listen().empty()) {
    listeners.push_back({TcpListener::kData, &config.data_listen()});
  }
  if (config::MetricsEnabled(config)) {
    listeners.push_back({TcpListener::kMetrics, &config.metrics_listen()});
  }
  absl::flat_hash_set<uint16_t> ports;
  for (const auto& [listener, address] : listeners) {
    if (listener == self) continue;
    std::optional<uint16_t> port = PortOf(*address);
    if (port.has_value() && *port != 0) ports.insert(*port);
  }
  return ports;
}

absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> StartMetricsListener(
    const v1::DaemonConfig& config,
    std::shared_ptr<prometheus::Collectable> collectable) {
  auto start = [&] {
    return metrics::MetricsServer::Start(config.metrics_listen(), collectable);
  };
  if (PortOf(config.metrics_listen()).value_or(1) != 0) return start();
  return startup::StartAvoidingPorts<metrics::MetricsServer>(
      start, FixedPortsOfOthers(config, TcpListener::kMetrics));
}

}  // namespace rdmad
