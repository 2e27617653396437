#include "daemon/metrics/metrics_server.h"

#include <algorithm>
#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/region_address.h"
#include "daemon/metrics/listening_sockets.h"
#include "prometheus/exposer.h"

namespace rdmad::metrics {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen,
    std::shared_ptr<prometheus::Collectable> collectable) {
  if (absl::Status s = ValidatePeerAddress(listen, /*is_listen_address=*/true);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics_listen: ", s.message()));
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  // The listener civetweb opens is the one not open before (the process's
  // other listeners bound other ports or addresses before this).
  const std::vector<ListeningSocket> before = ListeningTcpSockets();
  try {
    // Two HTTP threads: scrapes are rare and cheap.
    server->exposer_ = std::make_unique<prometheus::Exposer>(listen, 2);
  } catch (const std::exception& e) {
    // civetweb reports a failed bind by throwing from the constructor.
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", listen, ": ", e.what(),
        " (is the port in use? pick another metrics_listen)"));
  }
  server->collectable_ = std::move(collectable);
  server->exposer_->RegisterCollectable(server->collectable_);
  const auto ports = server->exposer_->GetListeningPorts();
  const std::string host = listen.substr(0, listen.rfind(':'));
  server->port_ = ports.empty() ? 0 : static_cast<uint16_t>(ports.front());
  server->address_ = absl::StrCat(host, ":", server->port_);
  for (const ListeningSocket& s : ListeningTcpSockets()) {
    const bool is_new =
        std::none_of(before.begin(), before.end(),
                     [&](const ListeningSocket& b) { return b.fd == s.fd; });
    if (is_new && s.port == server->port_) server->listener_fds_.push_back(s.fd);
  }
  return server;
}

MetricsServer::~MetricsServer() {
  // civetweb's accept thread sees the stop flag only when its poll returns,
  // after up to 2 s (listening_sockets.h): wake it, then stop.
  for (int fd : listener_fds_) WakeListener(fd, port_);
  exposer_.reset();
}

}  // namespace rdmad::metrics
