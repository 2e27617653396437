#include "daemon/service/peer_service.h"

#include "absl/strings/str_cat.h"
#include "common/region_address.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/paging.h"
#include "daemon/service/proto_convert.h"
#include "daemon/transport/transport_choice.h"

namespace rdmad::service {
namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context,
                               const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace

absl::Status PeerService::CheckPeer(grpc::CallbackServerContext* context) const {
  if (state_->peer_allow.AllowsGrpcPeer(context->peer())) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "peer ", context->peer(), " is not in this daemon's peer_allow list (",
      state_->peer_allow.ToString(), "): add its address to peer_allow in "
      "the rdmad config of the daemon you are calling"));
}

grpc::ServerUnaryReactor* PeerService::Hello(
    grpc::CallbackServerContext* context, const v1::HelloRequest*,
    v1::HelloResponse* response) {
  if (absl::Status s = CheckPeer(context); !s.ok()) return Done(context, s);
  response->set_version(state_->identity.version);
  response->set_incarnation(state_->identity.incarnation);
  for (core::TransportKind kind :
       transport::OfferedTransports(state_->identity.transport)) {
    response->add_transports(ToProto(kind));
  }
  for (const auto& device : state_->devices) {
    for (const auto& port : device.ports) {
      for (const auto& gid : port.gids) {
        v1::FabricEndpoint* e = response->add_endpoints();
        e->set_device(device.name);
        e->set_port(port.port);
        e->set_link_layer(port.link_layer);
        e->set_gid(std::string(gid.raw.begin(), gid.raw.end()));
        e->set_gid_index(gid.index);
        e->set_gid_type(gid.type);
        e->set_lid(port.lid);
        e->set_active_mtu(port.active_mtu);
      }
    }
  }
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* PeerService::Connect(
    grpc::CallbackServerContext* context, const v1::ConnectRequest* request,
    v1::ConnectResponse* response) {
  if (absl::Status s = CheckPeer(context); !s.ok()) return Done(context, s);
  if (request->target_incarnation() != 0 &&
      request->target_incarnation() != state_->identity.incarnation) {
    // The caller's Hello was answered by an earlier run of this daemon.
    return Done(context, absl::FailedPreconditionError(absl::StrCat(
                             "this daemon restarted since your Hello "
                             "(incarnation is now ",
                             state_->identity.incarnation, "): say Hello again")));
  }
  transport::ConnectAcceptor* acceptor =
      request->transport() == v1::TRANSPORT_TCP     ? state_->tcp_acceptor
      : request->transport() == v1::TRANSPORT_VERBS ? state_->verbs_acceptor
                                                    : nullptr;
  if (acceptor == nullptr) {
    return Done(context,
                absl::UnimplementedError(absl::StrCat(
                    "this daemon cannot accept ",
                    v1::TransportKind_IsValid(request->transport())
                        ? v1::TransportKind_Name(request->transport())
                        : absl::StrCat("transport ", request->transport()),
                    " connections")));
  }
  if (absl::Status s = acceptor->Accept(*request, response); !s.ok()) {
    return Done(context, s);
  }
  response->set_incarnation(state_->identity.incarnation);
  response->set_generation(request->generation());
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* PeerService::Resolve(
    grpc::CallbackServerContext* context, const v1::ResolveRequest* request,
    v1::ResolveResponse* response) {
  if (absl::Status s = CheckPeer(context); !s.ok()) return Done(context, s);
  if (absl::Status s = ValidateRegionName(request->name()); !s.ok()) {
    return Done(context, s);
  }
  auto region = state_->regions->FindExported(request->name());
  if (!region.ok()) return Done(context, region.status());
  const core::RegionSnapshot snapshot = (*region)->Snapshot();
  ToDescriptor(state_->identity, snapshot, response->mutable_region());
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* PeerService::ListExports(
    grpc::CallbackServerContext* context,
    const v1::ListExportsRequest* request, v1::ListExportsResponse* response) {
  if (absl::Status s = CheckPeer(context); !s.ok()) return Done(context, s);
  auto after = ParseNameToken(request->page_token());
  if (!after.ok()) return Done(context, after.status());
  // Names, sizes and access only: keys go out one region at a time, to
  // peers that Resolve it.
  const core::RegionPage page =
      state_->regions->ListExported(*after, PageSize(request->page_size()));
  for (const core::RegionSnapshot& region : page.regions) {
    // Unexported since it was listed.
    if (region.exported.access == core::RemoteAccess::kNone) continue;
    v1::ExportedRegion* out = response->add_regions();
    out->set_name(region.name);
    out->set_length(region.size);
    out->set_access(ToProto(region.exported.access));
  }
  if (page.more && !page.regions.empty()) {
    response->set_next_page_token(page.regions.back().name);
  }
  return Done(context, absl::OkStatus());
}

}  // namespace rdmad::service
