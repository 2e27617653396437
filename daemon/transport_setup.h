// TransportSetup: the one place the daemon opens what moves data — its RDMA
// devices (when the config's transport allows them), the transport it
// offers peers and why, memory registration, the connecting and serving
// sides of each transport — so Daemon::Start only wires them up.
#ifndef RDMAD_DAEMON_TRANSPORT_SETUP_H_
#define RDMAD_DAEMON_TRANSPORT_SETUP_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/config/resolved_config.h"
#include "daemon/core/device_info.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/core/region_table.h"
#include "daemon/runtime/io_runtime.h"
#include "daemon/transport/tcp/data_server.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/transport_choice.h"
#include "daemon/transport/verbs/verbs_transport.h"
#include "rdmad/v1/config.pb.h"

namespace rdmad {

struct Transports {
  std::vector<core::DeviceInfo> devices;  // usable ones; empty on TCP
  transport::TransportChoice choice;      // what this daemon offers, why
  std::unique_ptr<core::MemoryRegistrar> registrar;
  std::shared_ptr<verbs::VerbsFabric> fabric;  // null on TCP-only nodes
  std::unique_ptr<verbs::VerbsAcceptor> verbs_acceptor;  // null on TCP
  // One per transport kind this daemon connects with (for the peer
  // connector, which takes them).
  std::vector<std::unique_ptr<transport::Connector>> connectors;
};

// Discovers devices and chooses the transport (transport_choice.h); opens
// the devices and the verbs fabric where verbs is chosen. The connectors
// put their channels on `runtime` (not owned; outlives them).
absl::StatusOr<Transports> OpenTransports(const v1::DaemonConfig& config,
                                          const config::ResolvedConfig& resolved,
                                          runtime::IoRuntime* runtime);

// Tells the verbs acceptor (if any) where the notices of WRITEs with an
// immediate that peers send over verbs go: checked against `regions`,
// announced to `notifications` (both not owned; the daemon stops the
// acceptor's pools, verbs_acceptor->Clear(), before it destroys them).
void ServeVerbsNotices(Transports& transports,
                       const core::RegionTable* regions,
                       core::NotificationSink* notifications);

// The TCP data listener: every daemon runs it, since a peer may lack RDMA
// even where this node has it. It tells `notifications` of WRITEs with an
// immediate. `regions`, `notifications` and `runtime` are not owned.
absl::StatusOr<std::unique_ptr<tcp::TcpDataServer>> StartDataServer(
    const v1::DaemonConfig& config, const config::ResolvedConfig& resolved,
    const core::RegionTable* regions, core::NotificationSink* notifications,
    runtime::IoRuntime* runtime);

}  // namespace rdmad

#endif  // RDMAD_DAEMON_TRANSPORT_SETUP_H_
