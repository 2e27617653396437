#include "daemon/servers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/service/health_reflection.h"
#include "daemon/startup/port_check.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"

namespace rdmad {
namespace {

// Counts calls and turns unparsable bodies into INVALID_ARGUMENT.
void TrackCalls(grpc::ServerBuilder& builder,
                std::shared_ptr<service::CallTracker::Counter> counter) {
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      creators;
  creators.push_back(
      std::make_unique<service::CallTracker>(std::move(counter)));
  builder.experimental().SetInterceptorCreators(std::move(creators));
}

}  // namespace

void EnableServerPlugins() {
  grpc::EnableDefaultHealthCheckService(true);
  // So that reflection describes the health service to generic clients.
  service::RegisterHealthDescriptors();
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
}

absl::StatusOr<StartedServer> StartPeerServer(
    const std::string& listen, const std::optional<config::PeerTls>& tls,
    grpc::Service* service,
    std::shared_ptr<service::CallTracker::Counter> calls) {
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
  StartedServer out;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, credentials, &out.port);
  // gRPC sets SO_REUSEPORT by default: a second daemon on this port would
  // bind too and get part of the connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(service);
  TrackCalls(builder, std::move(calls));
  out.server = builder.BuildAndStart();
  if (out.server == nullptr || out.port == 0) {
    return startup::ListenFailure("peers", "--peer_listen", listen);
  }
  return out;
}

absl::StatusOr<StartedServer> StartLocalServer(
    local_socket::LocalListener& listener, grpc::Service* service, uint32_t mode,
    int64_t gid, std::shared_ptr<service::CallTracker::Counter> calls) {
  StartedServer out;
  grpc::ServerBuilder builder;
  builder.RegisterService(service);
  TrackCalls(builder, std::move(calls));
  out.server = builder.BuildAndStart();
  if (out.server == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve gRPC on unix:", listener.path()));
  }
  RDMAD_RETURN_IF_ERROR(listener.Start(out.server.get(), mode));
  RDMAD_RETURN_IF_ERROR(ChownSocket(listener.path(), gid));
  return out;
}

std::shared_ptr<grpc::ChannelCredentials> PeerChannelCredentials(
    const std::optional<config::PeerTls>& tls) {
  if (!tls.has_value()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = tls->ca;
  ssl.pem_private_key = tls->key;
  ssl.pem_cert_chain = tls->cert;
  return grpc::SslCredentials(ssl);
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

}  // namespace rdmad
