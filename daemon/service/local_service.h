// LocalService: rdmad.v1.Local for clients on this node (Unix socket).
//
// Thin, like every service here: authenticate the session, validate the
// request, call the core, convert the status once. Uses the gRPC callback
// API so that no gRPC thread ever waits for a transfer to complete.
#ifndef RDMAD_DAEMON_SERVICE_LOCAL_SERVICE_H_
#define RDMAD_DAEMON_SERVICE_LOCAL_SERVICE_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "daemon/core/device_info.h"
#include "daemon/core/region.h"
#include "daemon/core/region_table.h"
#include "daemon/core/session_table.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/directory/cluster_directory.h"
#include "daemon/local_socket/local_listener.h"
#include "daemon/peer/peer_queries.h"
#include "daemon/ring/queue_control.h"
#include "daemon/service/daemon_identity.h"
#include "daemon/service/directory_calls.h"
#include "daemon/service/peer_inspector.h"
#include "daemon/transport/transport.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::service {

// What the Local service calls, and nothing more. Pointers are not owned;
// all outlive the service. The daemon passes its own objects; unit tests
// pass in-memory ones (a RegionTable over a NullRegistrar) and fakes.
struct LocalServiceDeps {
  // Version, incarnation, addresses: read at each call, since the daemon
  // fills in its listening addresses after the service is built.
  const DaemonIdentity* identity = nullptr;
  // The Prometheus endpoint GetStatus names; null: metrics off.
  const MetricsAddress* metrics_address = nullptr;
  // The devices ListDevices and GetStatus describe; none on TCP.
  const std::vector<core::DeviceInfo>* devices = nullptr;
  // The sessions calls are bound to.
  const core::SessionTable* sessions = nullptr;
  // Who is at the other end of a call's connection, from its gRPC peer
  // string (the Local socket's SO_PEERCRED): a session token is taken only
  // from the process it was issued to. Empty: calls are bound to their
  // token alone (tests that run without the Local socket).
  std::function<absl::StatusOr<local_socket::ConnectionCredentials>(
      absl::string_view grpc_peer)>
      credentials_of;
  // Takes the descriptor a session passed on the session socket under a
  // token (RegisterBuffer, RegisterDmabuf); required.
  std::function<absl::StatusOr<UniqueFd>(uint64_t session_id, uint64_t token)>
      take_passed_fd;
  // The regions the region calls manage and GetStatus counts.
  core::RegionTable* regions = nullptr;
  // Runs Write, Read and Batch.
  core::TransferEngine* transfers = nullptr;
  // Client queues and remote handles; null: this daemon has none.
  ring::QueueControl* queues = nullptr;
  // Remote daemons (ListPeers, ListQps, OpenRemote to a peer); null: none.
  peer::PeerQueries* peers = nullptr;
  // The connections each transport serves to peers (ListQps); null if not
  // available.
  const transport::ConnectAcceptor* tcp_acceptor = nullptr;
  const transport::ConnectAcceptor* verbs_acceptor = nullptr;
  // The cluster directory; null without one.
  directory::ClusterDirectory* directory = nullptr;
  // Asks other daemons for ListRemoteRegions and StatRegion; required.
  PeerInspection* inspector = nullptr;
};

// Thread-safe: calls read `deps` only, and the parts it points to are
// thread-safe.
class LocalService final : public v1::Local::CallbackService {
 public:
  // Every pointer of `deps` but those it says may be null is required.
  explicit LocalService(LocalServiceDeps deps)
      : deps_(std::move(deps)), directory_calls_(deps_.directory) {}

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;
  grpc::ServerUnaryReactor* ListDevices(
      grpc::CallbackServerContext* context,
      const v1::ListDevicesRequest* request,
      v1::ListDevicesResponse* response) override;
  grpc::ServerUnaryReactor* ListRegions(
      grpc::CallbackServerContext* context,
      const v1::ListRegionsRequest* request,
      v1::ListRegionsResponse* response) override;
  grpc::ServerUnaryReactor* ListPeers(grpc::CallbackServerContext* context,
                                      const v1::ListPeersRequest* request,
                                      v1::ListPeersResponse* response) override;
  grpc::ServerUnaryReactor* ListQps(grpc::CallbackServerContext* context,
                                    const v1::ListQpsRequest* request,
                                    v1::ListQpsResponse* response) override;
  grpc::ServerUnaryReactor* AllocateBuffer(
      grpc::CallbackServerContext* context,
      const v1::AllocateBufferRequest* request,
      v1::AllocateBufferResponse* response) override;
  grpc::ServerUnaryReactor* RegisterBuffer(
      grpc::CallbackServerContext* context,
      const v1::RegisterBufferRequest* request,
      v1::RegisterBufferResponse* response) override;
  grpc::ServerUnaryReactor* RegisterDmabuf(
      grpc::CallbackServerContext* context,
      const v1::RegisterDmabufRequest* request,
      v1::RegisterDmabufResponse* response) override;
  grpc::ServerUnaryReactor* FreeRegion(grpc::CallbackServerContext* context,
                                       const v1::FreeRegionRequest* request,
                                       v1::FreeRegionResponse* response) override;
  grpc::ServerUnaryReactor* ExportRegion(
      grpc::CallbackServerContext* context,
      const v1::ExportRegionRequest* request,
      v1::ExportRegionResponse* response) override;
  grpc::ServerUnaryReactor* GetDescriptor(
      grpc::CallbackServerContext* context,
      const v1::GetDescriptorRequest* request,
      v1::GetDescriptorResponse* response) override;
  // Transfers over gRPC (in local_service_transfers.cc).
  grpc::ServerUnaryReactor* Write(grpc::CallbackServerContext* context,
                                  const v1::TransferRequest* request,
                                  v1::TransferResponse* response) override;
  grpc::ServerUnaryReactor* Read(grpc::CallbackServerContext* context,
                                 const v1::TransferRequest* request,
                                 v1::TransferResponse* response) override;
  grpc::ServerUnaryReactor* Batch(grpc::CallbackServerContext* context,
                                  const v1::BatchRequest* request,
                                  v1::BatchResponse* response) override;
  // The shared-memory data path (in queue_calls.cc).
  grpc::ServerUnaryReactor* OpenQueue(grpc::CallbackServerContext* context,
                                      const v1::OpenQueueRequest* request,
                                      v1::OpenQueueResponse* response) override;
  grpc::ServerUnaryReactor* CloseQueue(grpc::CallbackServerContext* context,
                                       const v1::CloseQueueRequest* request,
                                       v1::CloseQueueResponse* response) override;
  grpc::ServerUnaryReactor* ListQueues(grpc::CallbackServerContext* context,
                                       const v1::ListQueuesRequest* request,
                                       v1::ListQueuesResponse* response) override;
  grpc::ServerUnaryReactor* OpenRemote(grpc::CallbackServerContext* context,
                                       const v1::OpenRemoteRequest* request,
                                       v1::OpenRemoteResponse* response) override;
  grpc::ServerUnaryReactor* CloseRemote(
      grpc::CallbackServerContext* context,
      const v1::CloseRemoteRequest* request,
      v1::CloseRemoteResponse* response) override;
  // The cluster directory (DirectoryCalls).
  grpc::ServerUnaryReactor* ListClusterRegions(
      grpc::CallbackServerContext* context,
      const v1::ListClusterRegionsRequest* request,
      v1::ListClusterRegionsResponse* response) override {
    return directory_calls_.ListClusterRegions(context, request, response);
  }
  grpc::ServerUnaryReactor* LookupRegion(
      grpc::CallbackServerContext* context,
      const v1::LookupRegionRequest* request,
      v1::LookupRegionResponse* response) override {
    return directory_calls_.LookupRegion(context, request, response);
  }

  // In local_service_regions.cc.
  grpc::ServerUnaryReactor* SetRegionPermissions(
      grpc::CallbackServerContext* context,
      const v1::SetRegionPermissionsRequest* request,
      v1::SetRegionPermissionsResponse* response) override;
  grpc::ServerUnaryReactor* ListRemoteRegions(
      grpc::CallbackServerContext* context,
      const v1::ListRemoteRegionsRequest* request,
      v1::ListRemoteRegionsResponse* response) override;
  grpc::ServerUnaryReactor* StatRegion(
      grpc::CallbackServerContext* context,
      const v1::StatRegionRequest* request,
      v1::StatRegionResponse* response) override;

 private:
  // The caller of a call that must have a session (kernel-verified creds).
  absl::StatusOr<core::Caller> RequireSession(
      grpc::CallbackServerContext* context) const;
  // The session caller if the call carries a token (which must then be
  // valid for this process), else an anonymous one.
  absl::StatusOr<core::Caller> OptionalSession(
      grpc::CallbackServerContext* context) const;
  // StatRegion of the region `name` that the daemon at `peer` exports,
  // asked as a transfer asks (Peer.Resolve, for `caller`'s uid). `check`
  // vets the peer's answer before it is given (a descriptor's stat: is it
  // still the region and export the descriptor names?).
  grpc::ServerUnaryReactor* StatFromPeer(
      grpc::CallbackServerContext* context, const core::Caller& caller,
      const std::string& peer, const std::string& name,
      v1::StatRegionResponse* response,
      std::function<absl::Status(const v1::RegionDescriptor&)> check);
  // StatRegion of a descriptor this daemon issued (`response` gets all but
  // the peer): checked here, as a transfer to it is (RouteToSelf), with
  // the caller's own permissions.
  absl::Status StatOwnDescriptor(const core::Caller& caller,
                                 const v1::RegionDescriptor& descriptor,
                                 v1::StatRegionResponse* response) const;
  grpc::ServerUnaryReactor* Transfer(grpc::CallbackServerContext* context,
                                     const v1::TransferRequest* request,
                                     v1::TransferResponse* response,
                                     core::OpType type);

  // Finishes an export-changing call once the cluster directory has the
  // region's name (at once without a directory or an export); undoes the
  // export (or frees the region, `undo_frees`) if the name is not ours.
  grpc::ServerUnaryReactor* ExportClaimed(grpc::CallbackServerContext* context,
                                          const core::Caller& caller,
                                          const core::Region& region,
                                          bool undo_frees);
  // RegisterBuffer and RegisterDmabuf, once their request passed its
  // checks: takes the descriptor `caller`'s session passed under
  // `fd_token`, makes the region of it with `adopt`, describes it in `out`
  // and claims its name (ExportClaimed).
  grpc::ServerUnaryReactor* AdoptPassed(
      grpc::CallbackServerContext* context, const core::Caller& caller,
      uint64_t fd_token,
      absl::FunctionRef<absl::StatusOr<std::shared_ptr<core::Region>>(UniqueFd)>
          adopt,
      v1::RegionInfo* out);

  const LocalServiceDeps deps_;
  const DirectoryCalls directory_calls_;
};

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_LOCAL_SERVICE_H_
