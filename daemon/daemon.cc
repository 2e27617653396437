#include "daemon/daemon.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/secure_random.h"
#include "common/session_wire.h"
#include "common/status_macros.h"
#include "daemon/core/pinned_cap.h"
#include "daemon/daemon_impl.h"
#include "daemon/directory/directory_config.h"
#include "daemon/peer/transport_kind_proto.h"
#include "daemon/process/memory_releaser.h"
#include "daemon/rdmad_version.h"
#include "daemon/servers.h"
#include "daemon/state/kept_regions.h"
#include "daemon/tcp_listeners.h"
#include "spdlog/spdlog.h"

namespace rdmad {
namespace {

constexpr absl::Duration kShutdownGrace = absl::Seconds(5);

// Raises RLIMIT_MEMLOCK as far as we are allowed: RDMA registration pins
// every page, and distributions default to a few MiB. Returns the limit in
// force afterwards (0 = unlimited).
uint64_t RaiseMemlockLimit() {
  rlimit limit{RLIM_INFINITY, RLIM_INFINITY};
  if (::setrlimit(RLIMIT_MEMLOCK, &limit) != 0) {
    ::getrlimit(RLIMIT_MEMLOCK, &limit);
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_MEMLOCK, &limit);
  }
  ::getrlimit(RLIMIT_MEMLOCK, &limit);
  return limit.rlim_cur == RLIM_INFINITY ? 0 : limit.rlim_cur;
}

// Raises RLIMIT_NOFILE's soft limit to its hard limit: each session, Local
// connection, region and peer connection holds a descriptor, and the usual
// soft limit (1024) is far below what the hard limit allows. Returns the
// soft limit in force afterwards.
uint64_t RaiseFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? (1u << 20) : limit.rlim_cur;
}

uint64_t PhysicalMemory() {
  return static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
         static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// The address peers should use: the listen address, unless it is a
// wildcard, in which case the advertised address or host name.
std::string AdvertisedAddress(const v1::DaemonConfig& config, int port) {
  if (!config.advertise_address().empty()) return config.advertise_address();
  auto listen = ParseHostPort(config.peer_listen(), AddressUse::kListen);
  std::string host = listen.ok() ? listen->host : "";
  if (IsWildcardHost(host)) {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    host = name;
  }
  return JoinHostPort(host, static_cast<uint16_t>(port));
}

core::RegionLimits RegionLimitsFor(const v1::DaemonConfig& config,
                                   uint64_t memlock_limit, bool pins_memory,
                                   const std::vector<core::DeviceInfo>& devices) {
  core::RegionLimits limits;
  // Pinned memory is counted against the locked-memory limit only where
  // memory is pinned (verbs); see core/pinned_cap.h.
  const core::PinnedCap cap = core::ChoosePinnedCap(
      pins_memory, config.max_pinned_bytes(), memlock_limit, PhysicalMemory());
  limits.max_pinned_bytes = cap.bytes;
  limits.max_pinned_bytes_source = cap.source;
  limits.max_region_size = PhysicalMemory();
  limits.max_pinned_bytes_per_uid = core::ChooseUidBytesQuota(
      config.has_quota_pinned_bytes_per_uid()
          ? std::optional<uint64_t>(config.quota_pinned_bytes_per_uid())
          : std::nullopt,
      cap);
  limits.max_regions_per_uid = config.quota_regions_per_uid();
  for (const auto& device : devices) {
    if (device.limits.max_mr_size != 0) {
      limits.max_region_size =
          std::min(limits.max_region_size, device.limits.max_mr_size);
    }
  }
  return limits;
}

// This daemon as the cluster directory's node record describes it.
v1::DirectoryNodeRecord NodeRecord(const service::DaemonIdentity& id,
                                   const std::vector<core::DeviceInfo>& devices) {
  v1::DirectoryNodeRecord node;
  node.set_address(id.peer_listen);
  node.set_incarnation(id.incarnation);
  node.set_version(id.version);
  for (core::TransportKind kind : transport::OfferedTransports(id.transport)) {
    node.add_transports(peer::ToProto(kind));
  }
  for (const auto& device : devices) node.add_devices(device.name);
  node.set_data_listen(id.data_listen);
  node.set_started_unix_ms(absl::ToUnixMillis(id.started));
  return node;
}

}  // namespace

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Daemon::~Daemon() { Shutdown(); }

const std::string& Daemon::peer_address() const {
  return impl_->identity.peer_listen;
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(
    const v1::DaemonConfig& input, std::string config_file) {
  auto impl = std::make_unique<Impl>();
  Impl& d = *impl;
  // 1. Configuration: defaults, checks, values resolved once.
  d.config = input;
  ApplyDefaults(d.config);
  RDMAD_ASSIGN_OR_RETURN(d.resolved, config::ResolveConfig(d.config));
  const v1::DaemonConfig& config = d.config;

  service::DaemonIdentity& id = d.identity;
  id.version = RDMAD_VERSION;
  id.incarnation = SecureRandom64();
  id.local_socket = config.socket();
  id.config_file = std::move(config_file);
  id.started = absl::Now();
  id.memlock_limit = RaiseMemlockLimit();
  const uint64_t file_limit = RaiseFileLimit();

  // 2. The event loops every data channel and connection lives on.
  RDMAD_ASSIGN_OR_RETURN(
      d.runtime,
      runtime::IoRuntime::Start(
          {.threads = static_cast<int>(config.io_threads()),
           .engine_threads = static_cast<int>(config.engine_threads()),
           .loop = {.spin = absl::Microseconds(config.engine_spin_us()),
                    .spin_when_preempted = config.engine_spin_when_preempted(),
                    .slice = absl::Microseconds(config.loop_slice_us())}}));
  d.timers = std::make_unique<runtime::LoopTimers>(d.runtime->loop(0));

  // 3. Devices and transports, then the regions they register.
  RDMAD_ASSIGN_OR_RETURN(d.transports,
                         OpenTransports(config, d.resolved, d.runtime.get()));
  id.transport = d.transports.choice.kind;
  id.transport_reason = d.transports.choice.reason;
  d.devices = d.transports.devices;
  // Regions an earlier daemon kept are adopted before any server starts,
  // so that peers and clients find them under their old names at once.
  RDMAD_ASSIGN_OR_RETURN(d.kept, state::KeptRegions::Open(config));
  d.regions = std::make_unique<core::RegionTable>(
      d.transports.registrar.get(),
      RegionLimitsFor(config, id.memlock_limit,
                      d.transports.fabric != nullptr, d.transports.devices),
      d.kept->keeper());
  d.kept->Adopt(*d.regions);

  // 4. Peers, the transfer engine and the clients' queues.
  {
    peer::GrpcPeerConnectorOptions options;
    options.version = id.version;
    options.incarnation = id.incarnation;
    options.offered = transport::OfferedTransports(id.transport);
    options.channel_credentials = PeerChannelCredentials(d.resolved.tls);
    options.idle_timeout = absl::Milliseconds(config.peer_channel_idle_ms());
    // Also for the calls that inspect peers (rdmactl regions --peer, stat).
    d.inspector =
        std::make_unique<service::PeerInspector>(options.channel_credentials);
    d.connector = std::make_unique<peer::GrpcPeerConnector>(
        std::move(options), std::move(d.transports.connectors));
    peer::PeerTableOptions table;
    table.mode = d.resolved.transport;
    table.max_peers = config.max_peers();
    table.max_peers_per_uid = config.max_peers_per_uid();
    table.new_peers_per_second = config.new_peers_per_second_per_uid();
    table.new_peers_burst = config.new_peers_burst_per_uid();
    table.handshakes_in_flight = config.handshakes_in_flight();
    // Daemons started together do not all call each other at once.
    table.handshake_cold_start = absl::Seconds(5);
    table.handshake_jitter = absl::Milliseconds(20);
    d.peers = std::make_unique<peer::PeerTable>(table, d.connector.get(),
                                                d.timers.get());
    d.handshakes_served = std::make_unique<peer::HandshakeAdmission>(
        peer::HandshakeAdmissionOptions{
            .role = "responder",
            .max_in_flight = config.handshakes_served_in_flight(),
            .max_queued = 4 * config.max_peers()},
        d.timers.get());
  }
  d.transfers = std::make_unique<core::TransferEngine>(
      d.regions.get(), d.peers.get(),
      core::TransferLimits{config.quota_transfers_per_uid()});
  d.metrics = std::make_unique<metrics::DaemonMetrics>(metrics::MetricSources{
      d.regions.get(), &d.sessions, d.peers.get(), d.handshakes_served.get(),
      id.version, id.transport, d.devices});
  d.transfers->SetObserver(d.metrics.get());
  d.queues = std::make_unique<ring::QueueRegistry>(
      d.runtime.get(), d.transfers.get(), &d.sessions, d.regions.get(),
      config.notification_backlog());
  d.transfers->SetNotificationSink(d.queues.get());
  d.metrics->SetQueues(d.queues.get());

  // 5. The TCP listeners, in the order tcp_listeners.h gives: metrics when
  // asked for (a scrape before the daemon is ready sees empty tables), the
  // data listener, and (7) the Peer server.
  if (config::MetricsEnabled(config)) {
    RDMAD_ASSIGN_OR_RETURN(
        d.metrics_server,
        StartMetricsListener(config, d.metrics->collectable()));
    spdlog::info("metrics on http://{}/metrics", d.metrics_server->address());
    d.metrics_address.Set(d.metrics_server->address());
  }
  // The TCP data listener serves this daemon's exported regions.
  RDMAD_ASSIGN_OR_RETURN(
      d.data_server, StartDataServer(config, d.resolved, d.regions.get(),
                                     d.queues.get(), d.runtime.get()));
  id.data_listen = d.data_server->address();
  ServeVerbsNotices(d.transports, d.regions.get(), d.queues.get());
  if (!d.resolved.peer_allow.empty()) {
    spdlog::info("peers allowed: {}", d.resolved.peer_allow.ToString());
  }

  // 6. The session socket first: the Local socket appearing is the signal
  // clients wait for, and it must not appear before sessions can be opened.
  d.session_server = std::make_unique<local_socket::SessionServer>(
      session_wire::SessionSocketPath(config.socket()), &d.sessions,
      d.regions.get(), local_socket::SessionLimits::ForFileLimit(file_limit));
  d.session_server->SetQueues(d.queues.get());
  RDMAD_RETURN_IF_ERROR(d.session_server->Start(d.resolved.socket_mode));
  RDMAD_RETURN_IF_ERROR(
      ChownSocket(d.session_server->path(), d.resolved.socket_gid));

  // 7. The gRPC servers: Peer, then Local.
  EnableServerPlugins();
  d.peer_service = std::make_unique<service::PeerService>(
      service::PeerServiceDeps{
          .identity = &d.identity,
          .devices = &d.devices,
          .peer_allow = &d.resolved.peer_allow,
          .regions = d.regions.get(),
          .tcp_acceptor = d.data_server.get(),
          .verbs_acceptor = d.transports.verbs_acceptor.get(),
          .handshakes = d.handshakes_served.get()});
  RDMAD_ASSIGN_OR_RETURN(
      StartedServer peer_server,
      StartPeerServer(config.peer_listen(), d.resolved.tls,
                      d.peer_service.get(), d.peer_calls));
  d.peer_server = std::move(peer_server.server);
  d.peer_server->GetHealthCheckService()->SetServingStatus(
      v1::Peer::service_full_name(), true);
  id.peer_listen = AdvertisedAddress(config, peer_server.port);
  d.connector->SetSelfAddress(id.peer_listen);
  d.queues->SetSelfAddress(id.peer_listen);

  // 8. The cluster directory: needs the Peer address it publishes, and must
  // follow regions from the first one (made through the Local service).
  RDMAD_ASSIGN_OR_RETURN(
      d.directory,
      directory::CreateFromConfig(
          config, NodeRecord(id, d.devices),
          d.resolved.tls.has_value() ? d.resolved.tls->identity : "",
          d.regions.get()));
  if (d.directory != nullptr) {
    // Transfers by name go only to holders this daemon would trust.
    d.holder_trust =
        core::HolderTrust(d.resolved.tls.has_value(), d.resolved.peer_allow);
    if (std::string why = directory::UnprotectedNamesWarning(
            config, d.resolved.tls.has_value());
        !why.empty()) {
      spdlog::warn("*** WARNING: {} ***", why);
    }
    d.regions->SetObserver(d.directory.get());
    d.transfers->SetDirectory(d.directory.get(), &d.holder_trust);
    d.metrics->SetDirectory(d.directory.get());
    d.directory->Start();
  }

  local_socket::LocalListenerOptions listener;
  listener.max_connections_per_uid = std::max<uint64_t>(16, file_limit / 8);
  d.local_listener =
      std::make_unique<local_socket::LocalListener>(config.socket(), listener);
  d.local_service = std::make_unique<service::LocalService>(
      service::LocalServiceDeps{
          .identity = &d.identity,
          .metrics_address = &d.metrics_address,
          .devices = &d.devices,
          .sessions = &d.sessions,
          .credentials_of =
              [listener = d.local_listener.get()](absl::string_view peer) {
                return listener->CredentialsOf(peer);
              },
          .take_passed_fd =
              [server = d.session_server.get()](uint64_t session_id,
                                                uint64_t token) {
                return server->TakePassedFd(session_id, token);
              },
          .regions = d.regions.get(),
          .transfers = d.transfers.get(),
          .queues = d.queues.get(),
          .peers = d.peers.get(),
          .tcp_acceptor = d.data_server.get(),
          .verbs_acceptor = d.transports.verbs_acceptor.get(),
          .directory = d.directory.get(),
          .inspector = d.inspector.get()});
  RDMAD_ASSIGN_OR_RETURN(
      StartedServer local_server,
      StartLocalServer(*d.local_listener, d.local_service.get(),
                       d.resolved.socket_mode, d.resolved.socket_gid,
                       d.local_calls));
  d.local_server = std::move(local_server.server);
  d.local_server->GetHealthCheckService()->SetServingStatus(
      v1::Local::service_full_name(), true);

  d.memory_releaser = std::make_unique<process::MemoryReleaser>();
  spdlog::info(
      "rdmad {} ready: local {} (sessions {}), peers {}, data {}, transport "
      "{} ({}), {} I/O threads",
      id.version, config.socket(), d.session_server->path(), id.peer_listen,
      id.data_listen, std::string(core::TransportKindName(id.transport)),
      id.transport_reason, d.runtime->size());
  d.started = true;
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

void Daemon::Shutdown() {
  if (impl_ != nullptr) impl_->TearDown();
}

void Daemon::Impl::TearDown() {
  if (shut_down) return;
  Impl& d = *this;
  d.shut_down = true;
  // Scrapes read the tables torn down below.
  d.metrics_server.reset();
  d.memory_releaser.reset();
  // First out of the cluster directory: revoking the lease removes every
  // entry of this daemon at once, so no one is sent here any more.
  if (d.directory) {
    d.directory->Stop();
    d.regions->SetObserver(nullptr);
  }
  const absl::Time grace_end = absl::Now() + kShutdownGrace;
  // A callback-API server's Shutdown waits for every call to finish, even
  // past its deadline; transfers still running at the end of the grace
  // period are failed by the peer table so that it returns.
  if (d.peers) d.peers->Drain(grace_end);
  // Handshakes still waiting their turn are told to retry now, so that
  // the Peer server's shutdown does not wait for their deadlines.
  if (d.handshakes_served) d.handshakes_served->Shutdown();
  // No new Local connections.
  if (d.local_listener) d.local_listener->Stop();
  // Calls in flight get the grace period to finish; then both servers shut
  // down at once. (Shutdown(deadline) would also wait, until the deadline,
  // for clients' idle connections to go away: an idle daemon with a client
  // connected took the whole grace period to exit.) Calls still running
  // then are cancelled, so each client gets a status rather than a hang.
  d.local_calls->WaitIdle(grace_end);
  d.peer_calls->WaitIdle(grace_end);
  const auto now = std::chrono::system_clock::now();
  if (d.local_server) d.local_server->Shutdown(now);
  if (d.peer_server) d.peer_server->Shutdown(now);
  if (d.session_server) d.session_server->Stop();
  // Clients' queues stop (they see it in their headers) and the engines
  // leave the loops.
  if (d.queues) d.queues->Shutdown();
  // Then the data path: our channels to peers, the calls to peers still
  // out, and peers' connections to us (all hold regions until they stop).
  if (d.peers) d.peers->Shutdown();
  if (d.connector) d.connector->Shutdown();
  if (d.data_server) d.data_server->Stop();
  if (d.transports.verbs_acceptor) d.transports.verbs_acceptor->Clear();
  // Last the loops: they run what the closes above queued (failing the
  // operations still in flight) and stop.
  if (d.runtime) d.runtime->Stop();
  const core::RegionTotals left =
      d.regions ? d.regions->Totals() : core::RegionTotals{};
  d.local_server.reset();
  d.peer_server.reset();
  d.regions.reset();
  d.transports.registrar.reset();
  if (!d.started) return;
  spdlog::info("rdmad stopped; {}", d.kept != nullptr
                                        ? d.kept->ShutdownSummary(left)
                                        : std::string("nothing was running"));
}

std::string Daemon::metrics_address() const {
  return impl_->metrics_server ? impl_->metrics_server->address() : "";
}

}  // namespace rdmad
