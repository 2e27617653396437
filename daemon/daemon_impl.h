// What rdmad::Daemon owns, in the order it is built (daemon.cc) and torn
// down in reverse. Shared by daemon.cc (start, shutdown) and
// daemon_reload.cc (SIGHUP). Not a public header.
#ifndef RDMAD_DAEMON_DAEMON_IMPL_H_
#define RDMAD_DAEMON_DAEMON_IMPL_H_

#include <memory>
#include <vector>

#include "daemon/config/resolved_config.h"
#include "daemon/core/holder_trust.h"
#include "daemon/core/region_table.h"
#include "daemon/core/session_table.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/daemon.h"
#include "daemon/directory/etcd_directory.h"
#include "daemon/local_socket/local_listener.h"
#include "daemon/local_socket/session_server.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/metrics/metrics_server.h"
#include "daemon/peer/grpc_peer_connector.h"
#include "daemon/peer/peer_table.h"
#include "daemon/process/memory_releaser.h"
#include "daemon/ring/queue_registry.h"
#include "daemon/runtime/io_runtime.h"
#include "daemon/runtime/timers.h"
#include "daemon/service/call_tracker.h"
#include "daemon/service/daemon_identity.h"
#include "daemon/service/local_service.h"
#include "daemon/service/peer_inspector.h"
#include "daemon/service/peer_service.h"
#include "daemon/state/kept_regions.h"
#include "daemon/transport_setup.h"
#include "grpcpp/grpcpp.h"

namespace rdmad {

struct Daemon::Impl {
  v1::DaemonConfig config;
  config::ResolvedConfig resolved;
  // First so that it goes last: every channel and connection below lives
  // on its loops.
  std::unique_ptr<runtime::IoRuntime> runtime;
  std::unique_ptr<runtime::LoopTimers> timers;
  Transports transports;
  // Where named regions outlive the daemon (the table's keeper).
  std::unique_ptr<state::KeptRegions> kept;
  std::unique_ptr<core::RegionTable> regions;
  // Cluster directory (null without one). Stopped first in Shutdown, but
  // kept until the end: transfers in flight may still call it.
  std::unique_ptr<directory::EtcdDirectory> directory;
  // Which holders transfers by name may go to (core/holder_trust.h).
  core::HolderTrust holder_trust;
  core::SessionTable sessions;
  std::unique_ptr<tcp::TcpDataServer> data_server;
  std::unique_ptr<peer::GrpcPeerConnector> connector;
  std::unique_ptr<peer::PeerTable> peers;
  // The handshakes this daemon serves (Peer.Hello's proposals, Connect).
  std::unique_ptr<peer::HandshakeAdmission> handshakes_served;
  // Observes `transfers` and reads the tables above at scrape time.
  std::unique_ptr<metrics::DaemonMetrics> metrics;
  std::unique_ptr<core::TransferEngine> transfers;
  // Client queues: their engines run on the runtime's engine loops.
  std::unique_ptr<ring::QueueRegistry> queues;
  // Who this daemon is and what it serves with, as the services tell it.
  service::DaemonIdentity identity;
  service::MetricsAddress metrics_address;
  std::vector<core::DeviceInfo> devices;
  std::unique_ptr<local_socket::SessionServer> session_server;
  std::unique_ptr<local_socket::LocalListener> local_listener;
  // Asks other daemons on behalf of Local calls; outlives the Local server,
  // whose shutdown waits for the calls that use it.
  std::unique_ptr<service::PeerInspector> inspector;
  std::unique_ptr<service::LocalService> local_service;
  std::unique_ptr<service::PeerService> peer_service;
  std::unique_ptr<grpc::Server> local_server;
  std::unique_ptr<grpc::Server> peer_server;
  // Calls in flight on each server (service::CallTracker).
  std::shared_ptr<service::CallTracker::Counter> local_calls =
      std::make_shared<service::CallTracker::Counter>();
  std::shared_ptr<service::CallTracker::Counter> peer_calls =
      std::make_shared<service::CallTracker::Counter>();
  std::unique_ptr<metrics::MetricsServer> metrics_server;  // null when off
  // Returns memory freed after bursts of connections to the kernel.
  std::unique_ptr<process::MemoryReleaser> memory_releaser;
  bool shut_down = false;
  // Set once Start has brought every part up. A start that failed half
  // way tears down quietly: "stopped" after "cannot start" would read as
  // a daemon that ran.
  bool started = false;

  // Stops every part in order (daemon.cc); once. Daemon::Shutdown runs it,
  // and so does the destructor after a Start that failed half way: parts
  // already running (the event loops above all) must stop before the
  // members they use are destroyed, which plain member destruction (in
  // reverse order of declaration) would not ensure.
  void TearDown();
  ~Impl() { TearDown(); }
};

}  // namespace rdmad

#endif  // RDMAD_DAEMON_DAEMON_IMPL_H_
