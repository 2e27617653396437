// Implementation of include/rdmad/client.h: inspection of the daemon and
// of the cluster directory, as the public types of rdmad/info.h.
#include <string>
#include <utility>
#include <vector>

#include "client/client_impl.h"
#include "client/convert.h"
#include "client/session_link.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "rdmad/client.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad {

using client_internal::FromGrpc;
using client_internal::FromProto;
using client_internal::SessionLink;
using client_internal::ToProto;

namespace {

// Follows a paged listing from `request`: `fetch(context, request,
// response)` makes one call (a fresh context each), `take(response)` keeps
// its entries and returns how many there were. Stops at the last page, an
// empty one, or one whose token does not move on (which would loop
// forever).
template <typename Response, typename Request, typename Fetch, typename Take>
absl::Status FollowPages(Request request, Fetch fetch, Take take) {
  do {
    grpc::ClientContext context;
    Response response;
    RDMAD_RETURN_IF_ERROR(fetch(context, request, response));
    const size_t taken = take(response);
    if (taken == 0 ||
        response.next_page_token() == request.page_token()) {
      break;
    }
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DaemonStatus> Client::GetStatus() {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::GetStatusResponse response;
  RDMAD_RETURN_IF_ERROR(FromGrpc(
      call.stub->GetStatus(&context, v1::GetStatusRequest(), &response)));
  return FromProto(response);
}

absl::StatusOr<DeviceList> Client::ListDevices() {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::ListDevicesResponse response;
  RDMAD_RETURN_IF_ERROR(FromGrpc(
      call.stub->ListDevices(&context, v1::ListDevicesRequest(), &response)));
  return FromProto(response);
}

absl::StatusOr<std::vector<RegionInfo>> Client::ListRegions() {
  std::vector<RegionInfo> regions;
  RDMAD_RETURN_IF_ERROR(FollowPages<v1::ListRegionsResponse>(
      v1::ListRegionsRequest(),
      [this](grpc::ClientContext& context, const v1::ListRegionsRequest& request,
             v1::ListRegionsResponse& response) -> absl::Status {
        RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call,
                               impl_->link->Prepare(context));
        return FromGrpc(call.stub->ListRegions(&context, request, &response));
      },
      [&regions](const v1::ListRegionsResponse& response) {
        for (const v1::RegionInfo& region : response.regions()) {
          regions.push_back(FromProto(region));
        }
        return static_cast<size_t>(response.regions_size());
      }));
  return regions;
}

absl::StatusOr<std::vector<PeerInfo>> Client::ListPeers() {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::ListPeersResponse response;
  RDMAD_RETURN_IF_ERROR(FromGrpc(
      call.stub->ListPeers(&context, v1::ListPeersRequest(), &response)));
  std::vector<PeerInfo> peers;
  for (const v1::PeerInfo& peer : response.peers()) {
    peers.push_back(FromProto(peer));
  }
  return peers;
}

absl::StatusOr<std::vector<QpInfo>> Client::ListQps() {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::ListQpsResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(call.stub->ListQps(&context, v1::ListQpsRequest(), &response)));
  std::vector<QpInfo> qps;
  for (const v1::QpInfo& qp : response.qps()) qps.push_back(FromProto(qp));
  return qps;
}

absl::StatusOr<std::vector<QueueInfo>> Client::ListQueues() {
  std::vector<QueueInfo> queues;
  RDMAD_RETURN_IF_ERROR(FollowPages<v1::ListQueuesResponse>(
      v1::ListQueuesRequest(),
      [this](grpc::ClientContext& context, const v1::ListQueuesRequest& request,
             v1::ListQueuesResponse& response) -> absl::Status {
        RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call,
                               impl_->link->Prepare(context));
        return FromGrpc(call.stub->ListQueues(&context, request, &response));
      },
      [&queues](const v1::ListQueuesResponse& response) {
        for (const v1::QueueInfo& q : response.queues()) {
          queues.push_back(FromProto(q));
        }
        return static_cast<size_t>(response.queues_size());
      }));
  return queues;
}

absl::StatusOr<std::vector<RemoteRegionInfo>> Client::ListRemoteRegions(
    absl::string_view peer) {
  std::vector<RemoteRegionInfo> regions;
  v1::ListRemoteRegionsRequest request;
  request.set_peer(std::string(peer));
  RDMAD_RETURN_IF_ERROR(FollowPages<v1::ListRemoteRegionsResponse>(
      std::move(request),
      [this](grpc::ClientContext& context,
             const v1::ListRemoteRegionsRequest& request,
             v1::ListRemoteRegionsResponse& response) -> absl::Status {
        RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call,
                               impl_->link->Prepare(context));
        return FromGrpc(
            call.stub->ListRemoteRegions(&context, request, &response));
      },
      [&regions, peer = std::string(peer)](
          const v1::ListRemoteRegionsResponse& response) {
        for (const v1::ExportedRegion& region : response.regions()) {
          regions.push_back(FromProto(peer, region));
        }
        return static_cast<size_t>(response.regions_size());
      }));
  return regions;
}

absl::StatusOr<RemoteRegionInfo> Client::StatRegion(
    const RemoteRegion& region) {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::StatRegionRequest request;
  *request.mutable_region() = ToProto(region);
  v1::StatRegionResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(call.stub->StatRegion(&context, request, &response)));
  return FromProto(response.peer(), response.region());
}

absl::StatusOr<ClusterRegionList> Client::ListClusterRegions(
    absl::string_view prefix) {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::ListClusterRegionsRequest request;
  request.set_prefix(std::string(prefix));
  v1::ListClusterRegionsResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(call.stub->ListClusterRegions(&context, request, &response)));
  return FromProto(response);
}

absl::StatusOr<ClusterLookup> Client::LookupRegion(absl::string_view name,
                                                   bool fresh) {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::LookupRegionRequest request;
  request.set_name(std::string(name));
  request.set_fresh(fresh);
  v1::LookupRegionResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(call.stub->LookupRegion(&context, request, &response)));
  return FromProto(response);
}

}  // namespace rdmad
