// DaemonState: what the gRPC services read and act on. Built and owned by
// rdmad::Daemon; the services only borrow it.
#ifndef RDMAD_DAEMON_SERVICE_DAEMON_STATE_H_
#define RDMAD_DAEMON_SERVICE_DAEMON_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/device_info.h"
#include "daemon/core/region_table.h"
#include "daemon/core/session_table.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/core/transport_kind.h"
#include "daemon/directory/cluster_directory.h"
#include "daemon/peer/peer_table.h"
#include "daemon/ring/queue_registry.h"
#include "daemon/transport/transport.h"
#include "rdmad/v1/rdmad.pb.h"

namespace grpc {
class ChannelCredentials;
}  // namespace grpc

namespace rdmad::local_socket {
class LocalListener;
class SessionServer;
}  // namespace rdmad::local_socket

namespace rdmad::service {

// Identity and configuration fixed for the daemon's life.
struct DaemonIdentity {
  std::string version;
  uint64_t incarnation = 0;  // random per start, so peers notice restarts
  core::TransportKind transport = core::TransportKind::kTcp;
  std::string transport_reason;
  std::string local_socket;
  std::string peer_listen;
  std::string data_listen;  // HOST:PORT of the TCP data listener, as bound
  std::string config_file;  // the file --config named; "" for none
  absl::Time started;
  uint64_t memlock_limit = 0;  // 0 = unlimited
};

// The Prometheus endpoint's address, which a reload may change while the
// services read it. Thread-safe.
class MetricsAddress {
 public:
  void Set(std::string address) {
    absl::MutexLock lock(&mu_);
    address_ = std::move(address);
  }
  // HOST:PORT, "" when metrics are off.
  std::string Get() const {
    absl::MutexLock lock(&mu_);
    return address_;
  }

 private:
  mutable absl::Mutex mu_;
  std::string address_ ABSL_GUARDED_BY(mu_);
};

// Pointers are not owned; all outlive the services.
struct DaemonState {
  DaemonIdentity identity;
  MetricsAddress metrics_address;
  std::vector<core::DeviceInfo> devices;
  core::SessionTable* sessions = nullptr;
  core::RegionTable* regions = nullptr;
  core::TransferEngine* transfers = nullptr;
  // Client queues and remote handles of the shared-memory data path.
  ring::QueueRegistry* queues = nullptr;
  local_socket::SessionServer* session_server = nullptr;
  // Accepts the Local socket's connections: who is at the other end of
  // each. Null only in tests that run the service without it, which then
  // bind calls to nothing but their token.
  const local_socket::LocalListener* local_listener = nullptr;
  // Remote daemons and the data channels to them (ListPeers/ListQps).
  peer::PeerTable* peers = nullptr;
  // The connections each transport serves to peers (ListQps); null if not
  // available.
  transport::ConnectAcceptor* tcp_acceptor = nullptr;
  transport::ConnectAcceptor* verbs_acceptor = nullptr;
  // The cluster directory; null without one (config directory).
  directory::ClusterDirectory* directory = nullptr;
  // Credentials of channels to other daemons' Peer services (mutual TLS);
  // null: insecure.
  std::shared_ptr<grpc::ChannelCredentials> peer_credentials;
};

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_DAEMON_STATE_H_
