#include "daemon/daemon.h"

#include <grp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/region_address.h"
#include "common/secure_random.h"
#include "common/session_wire.h"
#include "common/status_macros.h"
#include "daemon/core/pinned_cap.h"
#include "daemon/core/region_table.h"
#include "daemon/core/session_table.h"
#include "daemon/config/config_reload.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/metrics/metrics_server.h"
#include "daemon/peer/peer_table.h"
#include "daemon/service/daemon_state.h"
#include "daemon/service/health_reflection.h"
#include "daemon/service/local_service.h"
#include "daemon/service/peer_service.h"
#include "daemon/service/session_server.h"
#include "daemon/service/unix_listener.h"
#include "daemon/startup/port_check.h"
#include "daemon/transport/tcp/data_server.h"
#include "daemon/transport/tcp/peer_channel.h"
#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/registrar.h"
#include "daemon/transport/verbs/verbs_transport.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
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

uint64_t PhysicalMemory() {
  return static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
         static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

bool HasActivePort(const std::vector<core::DeviceInfo>& devices) {
  for (const auto& device : devices) {
    for (const auto& port : device.ports) {
      if (port.state == "ACTIVE") return true;
    }
  }
  return false;
}

absl::StatusOr<uint32_t> ParseMode(const std::string& text) {
  uint32_t mode = 0;
  if (text.empty() || text.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket mode '", text, "' must be octal, e.g. 0660"));
  }
  for (char c : text) {
    if (c < '0' || c > '7') {
      return absl::InvalidArgumentError(
          absl::StrCat("socket mode '", text, "' must be octal, e.g. 0660"));
    }
    mode = mode * 8 + static_cast<uint32_t>(c - '0');
  }
  return mode;
}

// The address peers should use: the listen address, unless it is a
// wildcard, in which case the advertised address or host name.
std::string AdvertisedAddress(const v1::DaemonConfig& config, int port) {
  if (!config.advertise_address().empty()) return config.advertise_address();
  std::string host = config.peer_listen().substr(
      0, config.peer_listen().rfind(':'));
  if (host == "0.0.0.0" || host == "[::]" || host.empty()) {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    host = name;
  }
  return absl::StrCat(host, ":", port);
}

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
  return options;
}

absl::Status ValidateVerbsConfig(const v1::DaemonConfig& config) {
  if (config.qps_per_peer() > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "qps_per_peer ", config.qps_per_peer(), " is more than 64"));
  }
  if (config.qp_max_send_wr() > 16384) {
    return absl::InvalidArgumentError(absl::StrCat(
        "qp_max_send_wr ", config.qp_max_send_wr(), " is more than 16384"));
  }
  if (config.has_qp_timeout() && config.qp_timeout() > 31) {
    return absl::InvalidArgumentError(absl::StrCat(
        "qp_timeout ", config.qp_timeout(), " must be 0..31 (4.096 us * 2^n)"));
  }
  if (config.has_qp_retry_cnt() && config.qp_retry_cnt() > 7) {
    return absl::InvalidArgumentError("qp_retry_cnt must be 0..7");
  }
  if (config.has_qp_rnr_retry() && config.qp_rnr_retry() > 7) {
    return absl::InvalidArgumentError("qp_rnr_retry must be 0..7 (7 = infinite)");
  }
  return absl::OkStatus();
}

// The gid for config socket_group: a group name or a number. -1: unset.
absl::StatusOr<int64_t> ResolveSocketGroup(const std::string& group) {
  if (group.empty()) return -1;
  uint32_t gid = 0;
  if (absl::SimpleAtoi(group, &gid)) return gid;
  std::vector<char> buffer(16384);
  for (;;) {
    ::group entry{};
    ::group* found = nullptr;
    const int rc =
        ::getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &found);
    if (rc == ERANGE && buffer.size() < (1u << 20)) {
      buffer.resize(buffer.size() * 4);
      continue;
    }
    if (found == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "socket_group '", group, "' is not a group on this host: create it "
          "(groupadd ", group, ") or give a numeric gid"));
    }
    return static_cast<int64_t>(found->gr_gid);
  }
}

absl::Status ChownSocket(const std::string& path, int64_t gid) {
  if (gid < 0) return absl::OkStatus();
  if (::chown(path.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(gid)) !=
      0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("chown ", path, " to group ", gid,
                            " (socket_group): rdmad must run as root or be a "
                            "member of that group"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPem(const std::string& what,
                                    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read ", what, " ", path, ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " is not a PEM file"));
  }
  return text.str();
}

// Mutual TLS material for the Peer service, when configured.
struct PeerTls {
  std::string ca;
  std::string cert;
  std::string key;
};

absl::StatusOr<std::optional<PeerTls>> LoadPeerTls(
    const v1::DaemonConfig& config) {
  const int given = !config.tls_ca_file().empty() +
                    !config.tls_cert_file().empty() +
                    !config.tls_key_file().empty();
  if (given == 0) return std::nullopt;
  if (given != 3) {
    return absl::InvalidArgumentError(
        "mutual TLS needs all of tls_ca_file, tls_cert_file and tls_key_file");
  }
  PeerTls tls;
  RDMAD_ASSIGN_OR_RETURN(tls.ca, ReadPem("tls_ca_file", config.tls_ca_file()));
  RDMAD_ASSIGN_OR_RETURN(tls.cert,
                         ReadPem("tls_cert_file", config.tls_cert_file()));
  RDMAD_ASSIGN_OR_RETURN(tls.key, ReadPem("tls_key_file", config.tls_key_file()));
  return tls;
}

}  // namespace

struct Daemon::Impl {
  v1::DaemonConfig config;
  // Declared in dependency order; Shutdown() tears down in reverse.
  std::unique_ptr<core::MemoryRegistrar> registrar;
  std::unique_ptr<core::RegionTable> regions;
  core::SessionTable sessions;
  std::unique_ptr<tcp::TcpDataServer> data_server;
  std::shared_ptr<verbs::VerbsFabric> fabric;  // null on TCP-only nodes
  std::unique_ptr<verbs::VerbsAcceptor> verbs_acceptor;
  std::unique_ptr<peer::PeerTable> peers;
  // Observes `transfers` and reads the tables above at scrape time.
  std::unique_ptr<metrics::DaemonMetrics> metrics;
  std::unique_ptr<core::TransferEngine> transfers;
  service::DaemonState state;
  std::unique_ptr<service::SessionServer> session_server;
  std::unique_ptr<service::LocalService> local_service;
  std::unique_ptr<service::PeerService> peer_service;
  std::unique_ptr<grpc::Server> local_server;
  std::unique_ptr<grpc::Server> peer_server;
  std::unique_ptr<metrics::MetricsServer> metrics_server;  // null when off
  bool shut_down = false;
};

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Daemon::~Daemon() { Shutdown(); }

const std::string& Daemon::peer_address() const {
  return impl_->state.identity.peer_listen;
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(
    const v1::DaemonConfig& input) {
  auto impl = std::make_unique<Impl>();
  v1::DaemonConfig& config = impl->config;
  config = input;
  ApplyDefaults(config);
  RDMAD_ASSIGN_OR_RETURN(const uint32_t socket_mode,
                         ParseMode(config.socket_mode()));
  RDMAD_RETURN_IF_ERROR(ValidateVerbsConfig(config));
  RDMAD_ASSIGN_OR_RETURN(const int64_t socket_gid,
                         ResolveSocketGroup(config.socket_group()));
  RDMAD_ASSIGN_OR_RETURN(const std::optional<PeerTls> tls, LoadPeerTls(config));
  RDMAD_ASSIGN_OR_RETURN(
      impl->state.peer_allow,
      core::PeerAllowList::Parse({config.peer_allow().begin(),
                                  config.peer_allow().end()}));
  if (absl::Status s = ValidatePeerAddress(config.peer_listen(), true); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--peer_listen: ", s.message()));
  }

  service::DaemonIdentity& id = impl->state.identity;
  id.version = RDMAD_VERSION;
  id.incarnation = SecureRandom64();
  id.local_socket = config.socket();
  id.started = absl::Now();
  id.memlock_limit = RaiseMemlockLimit();

  // Devices and transport.
  const std::string& wanted = config.transport();
  if (wanted != "auto" && wanted != "verbs" && wanted != "tcp") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--transport=", wanted, " is not one of auto, verbs, tcp"));
  }
  std::vector<core::DeviceInfo> devices;
  if (wanted != "tcp") {
    RDMAD_ASSIGN_OR_RETURN(devices, verbs::DiscoverDevices());
  }
  const bool usable = HasActivePort(devices);
  if (wanted == "verbs" && !usable) {
    return absl::FailedPreconditionError(
        devices.empty()
            ? "--transport=verbs, but libibverbs found no RDMA device: load "
              "the driver (or rdma_rxe for soft-RoCE) or use --transport=tcp"
            : "--transport=verbs, but no RDMA port is ACTIVE: check the "
              "link (ibv_devinfo) or use --transport=tcp");
  }
  if (usable) {
    id.transport = v1::TRANSPORT_VERBS;
    id.transport_reason =
        wanted == "verbs" ? "forced by --transport=verbs"
                          : "an RDMA device with an active port was found";
    std::vector<std::shared_ptr<verbs::Device>> opened;
    for (const auto& device : devices) {
      RDMAD_ASSIGN_OR_RETURN(auto handle, verbs::OpenDevice(device.name));
      opened.push_back(std::move(handle));
    }
    RDMAD_ASSIGN_OR_RETURN(
        impl->fabric,
        verbs::VerbsFabric::Open(devices, opened, VerbsOptionsFrom(config)));
    impl->verbs_acceptor =
        std::make_unique<verbs::VerbsAcceptor>(impl->fabric);
    impl->registrar =
        std::make_unique<verbs::VerbsRegistrar>(std::move(opened));
  } else {
    id.transport = v1::TRANSPORT_TCP;
    id.transport_reason =
        wanted == "tcp"  ? "forced by --transport=tcp"
        : devices.empty() ? "no RDMA devices found by libibverbs"
                          : "no RDMA port is ACTIVE";
    if (wanted != "tcp") {
      spdlog::warn("{}; using the TCP transport for peers",
                   id.transport_reason);
    }
    impl->registrar = std::make_unique<core::NullRegistrar>();
    devices.clear();
  }
  impl->state.devices = devices;
  for (const auto& device : devices) {
    spdlog::info("RDMA device {}: {} port(s)", device.name, device.ports.size());
  }

  core::RegionLimits limits;
  // Pinned memory is counted against the locked-memory limit only where
  // memory is pinned (verbs); see core/pinned_cap.h.
  const core::PinnedCap cap = core::ChoosePinnedCap(
      impl->fabric != nullptr, config.max_pinned_bytes(), id.memlock_limit);
  limits.max_pinned_bytes = cap.bytes;
  limits.max_pinned_bytes_source = cap.source;
  limits.max_region_size = PhysicalMemory();
  limits.max_pinned_bytes_per_uid = config.quota_pinned_bytes_per_uid();
  limits.max_regions_per_uid = config.quota_regions_per_uid();
  for (const auto& device : devices) {
    if (device.limits.max_mr_size != 0) {
      limits.max_region_size =
          std::min(limits.max_region_size, device.limits.max_mr_size);
    }
  }
  impl->regions =
      std::make_unique<core::RegionTable>(impl->registrar.get(), limits);

  // The TCP data listener serves this daemon's exported regions to peers
  // (every daemon runs it: a peer may lack RDMA even where this node has it).
  {
    tcp::TcpDataServerOptions options;
    options.listen = config.data_listen();
    options.allow = impl->state.peer_allow;
    if (absl::Status s = ValidatePeerAddress(options.listen, true); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data_listen: ", s.message()));
    }
    const std::string listen_host =
        options.listen.substr(0, options.listen.rfind(':'));
    if (!config.advertise_address().empty() &&
        (listen_host == "0.0.0.0" || listen_host == "[::]" ||
         listen_host.empty())) {
      // Peers reach this node at the advertised host; so does data.
      std::string host = config.advertise_address().substr(
          0, config.advertise_address().rfind(':'));
      if (host.size() > 2 && host.front() == '[') {
        host = host.substr(1, host.size() - 2);
      }
      options.advertise_host = host;
    }
    RDMAD_ASSIGN_OR_RETURN(impl->data_server,
                           tcp::TcpDataServer::Start(impl->regions.get(),
                                                     options));
    id.data_listen = impl->data_server->address();
  }

  // Peers: the data path to other daemons.
  {
    peer::PeerTableOptions options;
    options.version = id.version;
    options.incarnation = id.incarnation;
    options.transport = wanted;
    options.offered.clear();
    if (id.transport == v1::TRANSPORT_VERBS) {
      options.offered.push_back(v1::TRANSPORT_VERBS);
    }
    options.offered.push_back(v1::TRANSPORT_TCP);
    if (tls.has_value()) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = tls->ca;
      ssl.pem_private_key = tls->key;
      ssl.pem_cert_chain = tls->cert;
      options.channel_credentials = grpc::SslCredentials(ssl);
    }
    impl->state.peer_credentials = options.channel_credentials;
    std::vector<std::unique_ptr<transport::Connector>> connectors;
    if (impl->fabric != nullptr) {
      connectors.push_back(
          std::make_unique<verbs::VerbsConnector>(impl->fabric));
    }
    connectors.push_back(
        std::make_unique<tcp::TcpConnector>(tcp::TcpChannelOptions{}));
    impl->peers = std::make_unique<peer::PeerTable>(std::move(options),
                                                    std::move(connectors));
  }
  impl->transfers = std::make_unique<core::TransferEngine>(
      impl->regions.get(), impl->peers.get(),
      core::TransferLimits{config.quota_transfers_per_uid()});
  impl->metrics = std::make_unique<metrics::DaemonMetrics>(
      metrics::MetricSources{impl->regions.get(), &impl->sessions,
                             impl->peers.get(), id.version,
                             id.transport == v1::TRANSPORT_VERBS ? "verbs"
                                                                 : "tcp"});
  impl->transfers->SetObserver(impl->metrics.get());
  impl->state.peers = impl->peers.get();
  impl->state.tcp_acceptor = impl->data_server.get();
  impl->state.verbs_acceptor = impl->verbs_acceptor.get();
  impl->state.sessions = &impl->sessions;
  impl->state.regions = impl->regions.get();
  impl->state.transfers = impl->transfers.get();
  if (!impl->state.peer_allow.empty()) {
    spdlog::info("peers allowed: {}", impl->state.peer_allow.ToString());
  }

  // Session socket first: the Local socket appearing is the signal clients
  // wait for, and it must not appear before sessions can be opened.
  impl->session_server = std::make_unique<service::SessionServer>(
      session_wire::SessionSocketPath(config.socket()), &impl->sessions,
      impl->regions.get());
  RDMAD_RETURN_IF_ERROR(impl->session_server->Start(socket_mode));
  RDMAD_RETURN_IF_ERROR(ChownSocket(impl->session_server->path(), socket_gid));
  impl->state.session_server = impl->session_server.get();

  grpc::EnableDefaultHealthCheckService(true);
  service::RegisterHealthDescriptors();
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  // Peer service.
  impl->peer_service = std::make_unique<service::PeerService>(&impl->state);
  {
    grpc::ServerBuilder builder;
    int port = 0;
    std::shared_ptr<grpc::ServerCredentials> credentials =
        grpc::InsecureServerCredentials();
    if (tls.has_value()) {
      // Mutual TLS: a peer must present a certificate the CA signed.
      grpc::SslServerCredentialsOptions ssl(
          GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
      ssl.pem_root_certs = tls->ca;
      ssl.pem_key_cert_pairs.push_back({tls->key, tls->cert});
      credentials = grpc::SslServerCredentials(ssl);
    }
    builder.AddListeningPort(config.peer_listen(), credentials, &port);
    // gRPC sets SO_REUSEPORT by default: a second daemon on this port would
    // bind too and get part of the connections.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.RegisterService(impl->peer_service.get());
    impl->peer_server = builder.BuildAndStart();
    if (impl->peer_server == nullptr || port == 0) {
      return startup::ListenFailure("peers", "--peer_listen",
                                    config.peer_listen());
    }
    impl->peer_server->GetHealthCheckService()->SetServingStatus(
        v1::Peer::service_full_name(), true);
    id.peer_listen = AdvertisedAddress(config, port);
    impl->peers->SetSelfAddress(id.peer_listen);
  }

  // Local service.
  impl->local_service = std::make_unique<service::LocalService>(&impl->state);
  {
    RDMAD_RETURN_IF_ERROR(service::ClaimSocketPath(config.socket()));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(absl::StrCat("unix:", config.socket()),
                             grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(impl->local_service.get());
    impl->local_server = builder.BuildAndStart();
    if (impl->local_server == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cannot serve gRPC on unix:", config.socket()));
    }
    impl->local_server->GetHealthCheckService()->SetServingStatus(
        v1::Local::service_full_name(), true);
    if (::chmod(config.socket().c_str(), socket_mode) != 0) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("chmod ", config.socket()));
    }
    RDMAD_RETURN_IF_ERROR(ChownSocket(config.socket(), socket_gid));
  }
  if (config::MetricsEnabled(config)) {
    RDMAD_ASSIGN_OR_RETURN(
        impl->metrics_server,
        metrics::MetricsServer::Start(config.metrics_listen(),
                                      impl->metrics->collectable()));
    spdlog::info("metrics on http://{}/metrics",
                 impl->metrics_server->address());
  }
  spdlog::info(
      "rdmad {} ready: local {} (sessions {}), peers {}, data {}, transport "
      "{} ({})",
      id.version, config.socket(), impl->session_server->path(),
      id.peer_listen, id.data_listen, v1::TransportKind_Name(id.transport),
      id.transport_reason);
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

void Daemon::Shutdown() {
  if (impl_ == nullptr || impl_->shut_down) return;
  impl_->shut_down = true;
  // Scrapes read the tables torn down below.
  impl_->metrics_server.reset();
  const absl::Time grace_end = absl::Now() + kShutdownGrace;
  const auto deadline = absl::ToChronoTime(grace_end);
  // A callback-API server's Shutdown waits for every call to finish, even
  // past its deadline; transfers still running at the end of the grace
  // period are failed by the peer table so that it returns.
  if (impl_->peers) impl_->peers->Drain(grace_end);
  // Calls still running after the grace period are cancelled, so each
  // client gets a status rather than a hang.
  if (impl_->local_server) impl_->local_server->Shutdown(deadline);
  if (impl_->peer_server) impl_->peer_server->Shutdown(deadline);
  if (impl_->session_server) impl_->session_server->Stop();
  // Then the data path: our channels to peers, and peers' connections to
  // us (both hold regions until they stop).
  if (impl_->peers) impl_->peers->Shutdown();
  if (impl_->data_server) impl_->data_server->Stop();
  if (impl_->verbs_acceptor) impl_->verbs_acceptor->Clear();
  if (impl_->local_server) ::unlink(impl_->config.socket().c_str());
  const core::RegionTotals left = impl_->regions->Totals();
  impl_->local_server.reset();
  impl_->peer_server.reset();
  impl_->regions.reset();
  impl_->registrar.reset();
  spdlog::info("rdmad stopped; released {} daemon-owned region(s)", left.count);
}

std::string Daemon::metrics_address() const {
  return impl_->metrics_server ? impl_->metrics_server->address() : "";
}

namespace {
// A config value as the reload log shows it: text-format, or "(unset)".
std::string Shown(const std::string& value) {
  return value.empty() ? "(unset)" : value;
}
}  // namespace

void Daemon::Reload(const v1::DaemonConfig& input) {
  v1::DaemonConfig next = input;
  ApplyDefaults(next);
  v1::DaemonConfig& running = impl_->config;
  const config::ReloadPlan plan = config::PlanReload(running, next);
  if (plan.empty()) {
    spdlog::info("config reload: nothing changed");
    return;
  }
  config::ReloadPlan applied;
  for (const config::FieldChange& change : plan.apply) {
    absl::Status status = absl::OkStatus();
    if (change.field == "log_level") {
      // CheckConfig vetted the name. The line saying so is logged at info:
      // after the change when that makes it more verbose, before otherwise,
      // so that it is seen either way.
      const auto level = spdlog::level::from_str(next.log_level());
      if (level <= spdlog::level::info) spdlog::set_level(level);
      spdlog::info("config reload: log_level changed from {} to {}: "
                   "applied", Shown(change.before), Shown(change.after));
      spdlog::set_level(level);
      applied.apply.push_back(change);
      continue;
    } else if (change.field == "socket_mode") {
      auto mode = ParseMode(next.socket_mode());
      status = mode.status();
      for (const std::string& path :
           {next.socket(), session_wire::SessionSocketPath(next.socket())}) {
        if (status.ok() && ::chmod(path.c_str(), *mode) != 0) {
          status = absl::ErrnoToStatus(errno, absl::StrCat("chmod ", path));
        }
      }
    } else if (change.field == "metrics_listen") {
      // The old endpoint stays up until the new one is bound.
      std::unique_ptr<metrics::MetricsServer> server;
      if (config::MetricsEnabled(next)) {
        auto started = metrics::MetricsServer::Start(
            next.metrics_listen(), impl_->metrics->collectable());
        status = started.status();
        if (started.ok()) server = *std::move(started);
      }
      if (status.ok()) {
        impl_->metrics_server = std::move(server);
        if (impl_->metrics_server) {
          spdlog::info("metrics on http://{}/metrics",
                       impl_->metrics_server->address());
        }
      }
    }
    if (status.ok()) {
      spdlog::info("config reload: {} changed from {} to {}: applied",
                   change.field, Shown(change.before), Shown(change.after));
      applied.apply.push_back(change);
    } else {
      spdlog::error("config reload: {} changed from {} to {} but could "
                    "not be applied ({}); still {}",
                    change.field, Shown(change.before), Shown(change.after),
                    status.ToString(), Shown(change.before));
    }
  }
  for (const config::FieldChange& change : plan.restart) {
    spdlog::warn("config reload: {} changed from {} to {}: needs a "
                 "restart of rdmad to take effect; still {}",
                 change.field, Shown(change.before), Shown(change.after), Shown(change.before));
  }
  running = config::Merge(running, next, applied);
}

}  // namespace rdmad
