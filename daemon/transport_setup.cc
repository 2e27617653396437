#include "daemon/transport_setup.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "daemon/startup/ephemeral_port.h"
#include "daemon/tcp_listeners.h"
#include "daemon/transport/tcp/peer_channel.h"
#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/registrar.h"
#include "spdlog/spdlog.h"

namespace rdmad {
namespace {

verbs::VerbsTransportOptions VerbsOptionsFrom(const v1::DaemonConfig& config) {
  verbs::VerbsTransportOptions options;
  options.device = config.device();
  if (config.has_gid_index()) options.gid_index = config.gid_index();
  if (config.qps_per_peer() != 0) options.qps_per_peer = config.qps_per_peer();
  if (config.qp_max_send_wr() != 0) {
    options.qp.max_send_wr = config.qp_max_send_wr();
  }
  if (config.has_qp_timeout()) {
    options.qp.timeout = static_cast<uint8_t>(config.qp_timeout());
  }
  if (config.has_qp_retry_cnt()) {
    options.qp.retry_cnt = static_cast<uint8_t>(config.qp_retry_cnt());
  }
  if (config.has_qp_rnr_retry()) {
    options.qp.rnr_retry = static_cast<uint8_t>(config.qp_rnr_retry());
  }
  if (config.verbs_chunk_bytes() != 0) {
    options.chunk_bytes = config.verbs_chunk_bytes();
  }
  if (config.verbs_read_chunk_bytes() != 0) {
    options.read_chunk_bytes = config.verbs_read_chunk_bytes();
  }
  // Every peer this daemon may talk to may also call it.
  options.max_accepted_peers =
      std::max(options.max_accepted_peers, config.max_peers());
  options.rails.assign(config.rails().begin(), config.rails().end());
  if (config.rail_stripe_bytes() != 0) {
    options.rail.stripe_threshold = config.rail_stripe_bytes();
  }
  if (config.rail_pause_seconds() != 0) {
    options.rail.pause_min = absl::Seconds(config.rail_pause_seconds());
  }
  if (config.rail_pause_max_seconds() != 0) {
    options.rail.pause_max = absl::Seconds(config.rail_pause_max_seconds());
  }
  for (const v1::RailPin& pin : config.rail_pins()) {
    options.pins.push_back(verbs::RailPinConfig{
        pin.region_prefix(), {pin.devices().begin(), pin.devices().end()}});
  }
  return options;
}

}  // namespace

absl::StatusOr<Transports> OpenTransports(const v1::DaemonConfig& config,
                                          const config::ResolvedConfig& resolved,
                                          runtime::IoRuntime* runtime) {
  Transports t;
  std::vector<core::DeviceInfo> devices;
  if (resolved.transport != core::TransportMode::kTcp) {
    RDMAD_ASSIGN_OR_RETURN(devices, verbs::DiscoverDevices());
  }
  RDMAD_ASSIGN_OR_RETURN(
      t.choice, transport::ChooseLocalTransport(resolved.transport, devices));
  if (t.choice.kind == core::TransportKind::kVerbs) {
    std::vector<std::shared_ptr<verbs::Device>> opened;
    for (const auto& device : devices) {
      RDMAD_ASSIGN_OR_RETURN(auto handle, verbs::OpenDevice(device.name));
      opened.push_back(std::move(handle));
    }
    RDMAD_ASSIGN_OR_RETURN(
        t.fabric,
        verbs::VerbsFabric::Open(devices, opened, VerbsOptionsFrom(config)));
    t.verbs_acceptor = std::make_unique<verbs::VerbsAcceptor>(t.fabric, runtime);
    t.registrar = std::make_unique<verbs::VerbsRegistrar>(std::move(opened));
    t.connectors.push_back(
        std::make_unique<verbs::VerbsConnector>(t.fabric, runtime));
    t.devices = std::move(devices);
    // The registrar probed each device for dma-buf when it opened them.
    for (const core::DmabufCapability& c : t.registrar->DmabufCapabilities()) {
      for (core::DeviceInfo& device : t.devices) {
        if (device.name != c.device) continue;
        device.dmabuf = c.supported;
        device.dmabuf_probe = c.probe;
      }
    }
    for (const auto& device : t.devices) {
      spdlog::info("RDMA device {} (driver {}): {} port(s); dma-buf: {}",
                   device.name, device.driver.empty() ? "?" : device.driver,
                   device.ports.size(), device.dmabuf_probe);
    }
  } else {
    if (resolved.transport != core::TransportMode::kTcp) {
      spdlog::warn("{}; using the TCP transport for peers", t.choice.reason);
    }
    t.registrar = std::make_unique<core::NullRegistrar>();
  }
  t.connectors.push_back(
      std::make_unique<tcp::TcpConnector>(tcp::TcpChannelOptions{}, runtime));
  return t;
}

void ServeVerbsNotices(Transports& transports,
                       const core::RegionTable* regions,
                       core::NotificationSink* notifications) {
  if (transports.verbs_acceptor != nullptr) {
    transports.verbs_acceptor->ServeNotices(regions, notifications);
  }
}

absl::StatusOr<std::unique_ptr<tcp::TcpDataServer>> StartDataServer(
    const v1::DaemonConfig& config, const config::ResolvedConfig& resolved,
    const core::RegionTable* regions, core::NotificationSink* notifications,
    runtime::IoRuntime* runtime) {
  tcp::TcpDataServerOptions options;
  options.notifications = notifications;
  options.listen = config.data_listen();
  options.allow = resolved.peer_allow;
  // A data connection from each peer, and room for a second where
  // bandwidth asks for it.
  options.max_open_connections =
      std::max(options.max_open_connections, 2 * config.max_peers());
  auto listen = ParseHostPort(options.listen, AddressUse::kListen);
  if (!listen.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data_listen: ", listen.status().message()));
  }
  if (!config.advertise_address().empty() && IsWildcardHost(listen->host)) {
    // Peers reach this node at the advertised host; so does data.
    RDMAD_ASSIGN_OR_RETURN(HostPort advertised,
                           ParseHostPort(config.advertise_address()));
    options.advertise_host = advertised.host;
  }
  auto start = [&] {
    return tcp::TcpDataServer::Start(regions, options, runtime);
  };
  if (listen->port != 0) return start();
  // Not a port another listener of this daemon is configured for
  // (tcp_listeners.h says why).
  return startup::StartAvoidingPorts<tcp::TcpDataServer>(
      start, FixedPortsOfOthers(config, TcpListener::kData));
}

}  // namespace rdmad
