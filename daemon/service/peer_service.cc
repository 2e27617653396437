#include "daemon/service/peer_service.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/region_address.h"
#include "common/status_macros.h"
#include "daemon/core/access_control.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/peer/peer_identity.h"
#include "daemon/service/call_helpers.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/paging.h"
#include "daemon/service/proto_convert.h"
#include "daemon/transport/transport_choice.h"

namespace rdmad::service {
namespace {

// The caller's own Peer address in Hello/Connect: optional, but when given
// it must be one.
absl::Status CheckCallerAddress(const std::string& address) {
  if (address.empty()) return absl::OkStatus();
  if (absl::Status s = ValidatePeerAddress(address); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("address (the caller's Peer address): ", s.message()));
  }
  return absl::OkStatus();
}

// The access a route from this daemon to itself may have on `region` for a
// local user `uid`: what the export grants and the region's own mode
// allows that uid. The uid is all the call carries, so group permissions
// do not apply on this route (the empty-peer route has them).
core::RemoteAccess SelfRouteAccess(const core::Region& region,
                                   core::RemoteAccess exported, uint32_t uid) {
  // No gid and no groups: gid (uint32_t)-1 is nobody's group.
  const core::Caller caller{0, uid, ~0u, 0, {}};
  const uint32_t local = core::PermittedBits(caller, region.acl());
  uint32_t granted = 0;
  if ((local & core::kLocalRead) != 0 &&
      core::Allows(exported, core::RemoteAccess::kRead)) {
    granted |= static_cast<uint32_t>(core::RemoteAccess::kRead);
  }
  if ((local & core::kLocalWrite) != 0 &&
      core::Allows(exported, core::RemoteAccess::kWrite)) {
    granted |= static_cast<uint32_t>(core::RemoteAccess::kWrite);
  }
  return static_cast<core::RemoteAccess>(granted);
}

}  // namespace

absl::Status PeerService::CheckPeer(grpc::CallbackServerContext* context) const {
  if (deps_.peer_allow->AllowsGrpcPeer(context->peer())) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "peer ", context->peer(), " is not in this daemon's peer_allow list (",
      deps_.peer_allow->ToString(), "): add its address to peer_allow in "
      "the rdmad config of the daemon you are calling"));
}

grpc::ServerUnaryReactor* PeerService::Hello(
    grpc::CallbackServerContext* context, const v1::HelloRequest* request,
    v1::HelloResponse* response) {
  if (absl::Status s = CheckPeer(context); !s.ok()) return Done(context, s);
  if (absl::Status s = CheckCallerAddress(request->address()); !s.ok()) {
    return Done(context, s);
  }
  for (int kind : request->transports()) {
    if (!v1::TransportKind_IsValid(kind) || kind == v1::TRANSPORT_UNSPECIFIED) {
      return Done(context, absl::InvalidArgumentError(absl::StrCat(
                               "transports: ", kind,
                               " is not a transport (TRANSPORT_VERBS or "
                               "TRANSPORT_TCP)")));
    }
  }
  for (const v1::FabricEndpoint& e : request->endpoints()) {
    if (!e.gid().empty() && e.gid().size() != 16) {
      return Done(context,
                  absl::InvalidArgumentError(absl::StrCat(
                      "endpoints: a GID is 16 bytes, got ", e.gid().size())));
    }
  }
  if (request->connect_size() > kMaxHelloProposals ||
      request->resolve_size() > static_cast<int>(peer::kMaxHelloNames)) {
    return Done(context, absl::InvalidArgumentError(absl::StrCat(
                             "a Hello carries at most ", kMaxHelloProposals,
                             " connect proposals and ", peer::kMaxHelloNames,
                             " names to resolve; got ", request->connect_size(),
                             " and ", request->resolve_size())));
  }
  response->set_version(deps_.identity->version);
  response->set_incarnation(deps_.identity->incarnation);
  for (core::TransportKind kind :
       transport::OfferedTransports(deps_.identity->transport)) {
    response->add_transports(ToProto(kind));
  }
  for (const auto& device : *deps_.devices) {
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
  if (request->connect().empty() && request->resolve().empty()) {
    return Done(context, absl::OkStatus());
  }
  // The rest is a handshake's work: admitted in turn.
  return Admitted(context, [this, context, request, response] {
    ServeHandshake(context, *request, response);
    return absl::OkStatus();
  });
}

void PeerService::ServeHandshake(grpc::CallbackServerContext* context,
                                 const v1::HelloRequest& request,
                                 v1::HelloResponse* response) const {
  bool tried = false;
  for (const v1::ConnectRequest& proposal : request.connect()) {
    if (Acceptor(proposal.transport()) == nullptr) continue;
    tried = true;
    absl::Status s =
        proposal.incarnation() != request.incarnation()
            ? absl::InvalidArgumentError(
                  "a proposal must carry the Hello's incarnation")
            : AcceptConnect(context, proposal, response->mutable_connect());
    if (s.ok()) {
      response->set_connect_transport(proposal.transport());
    } else {
      // Tried and failed: the caller learns why rather than trying a
      // transport it did not choose.
      response->clear_connect();
      response->mutable_connect_error()->set_code(static_cast<int>(s.code()));
      response->mutable_connect_error()->set_message(std::string(s.message()));
    }
    break;
  }
  if (!tried && !request.connect().empty()) {
    response->mutable_connect_error()->set_code(
        static_cast<int>(absl::StatusCode::kFailedPrecondition));
    response->mutable_connect_error()->set_message(
        "this daemon serves none of the proposed transports");
  }
  for (const v1::ResolveRequest& name : request.resolve()) {
    v1::ResolveResult* result = response->add_resolved();
    v1::ResolveRequest asked = name;
    asked.set_incarnation(request.incarnation());
    if (absl::Status s = ResolveFor(context, asked, result->mutable_region());
        !s.ok()) {
      result->clear_region();
      result->mutable_status()->set_code(static_cast<int>(s.code()));
      result->mutable_status()->set_message(std::string(s.message()));
    }
  }
}

grpc::ServerUnaryReactor* PeerService::Admitted(
    grpc::CallbackServerContext* context,
    absl::AnyInvocable<absl::Status()> work) const {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (deps_.handshakes == nullptr) {
    reactor->Finish(ToGrpcStatus(work()));
    return reactor;
  }
  // Its turn must come while the caller can still use the answer: a
  // waiter is told to retry a little before the call's own deadline.
  const absl::Time deadline = DeadlineOf(context);
  const absl::Time now = absl::Now();
  const absl::Time turn_by =
      deadline == absl::InfiniteFuture()
          ? deadline
          : deadline - std::min(absl::Seconds(1), (deadline - now) / 4);
  deps_.handshakes->Enter(
      turn_by,
      [reactor, work = std::move(work)](
          absl::StatusOr<peer::HandshakeAdmission::Ticket> ticket) mutable {
        // The slot (*ticket) is held until the work is done.
        reactor->Finish(ToGrpcStatus(ticket.ok() ? work() : ticket.status()));
      });
  return reactor;
}

transport::ConnectAcceptor* PeerService::Acceptor(int transport) const {
  return transport == v1::TRANSPORT_TCP     ? deps_.tcp_acceptor
         : transport == v1::TRANSPORT_VERBS ? deps_.verbs_acceptor
                                            : nullptr;
}

absl::Status PeerService::AcceptConnect(grpc::CallbackServerContext* context,
                                        const v1::ConnectRequest& request,
                                        v1::ConnectResponse* response) const {
  if (!v1::TransportKind_IsValid(request.transport()) ||
      request.transport() == v1::TRANSPORT_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("transport ", request.transport(),
                     " is not a transport: use TRANSPORT_VERBS or "
                     "TRANSPORT_TCP"));
  }
  RDMAD_RETURN_IF_ERROR(CheckCallerAddress(request.address()));
  if (request.target_incarnation() != 0 &&
      request.target_incarnation() != deps_.identity->incarnation) {
    // The caller's Hello was answered by an earlier run of this daemon.
    return absl::FailedPreconditionError(
        absl::StrCat("this daemon restarted since your Hello (incarnation is "
                     "now ",
                     deps_.identity->incarnation, "): say Hello again"));
  }
  transport::ConnectAcceptor* acceptor = Acceptor(request.transport());
  if (acceptor == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "this daemon cannot accept ",
        v1::TransportKind_Name(request.transport()), " connections"));
  }
  RDMAD_RETURN_IF_ERROR(acceptor->Accept(
      request, peer::PeerIdentityOf(*context).address, response));
  response->set_incarnation(deps_.identity->incarnation);
  response->set_generation(request.generation());
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PeerService::Connect(
    grpc::CallbackServerContext* context, const v1::ConnectRequest* request,
    v1::ConnectResponse* response) {
  if (absl::Status s = CheckPeer(context); !s.ok()) return Done(context, s);
  return Admitted(context, [this, context, request, response] {
    return AcceptConnect(context, *request, response);
  });
}

absl::Status PeerService::ResolveFor(grpc::CallbackServerContext* context,
                                     const v1::ResolveRequest& request,
                                     v1::RegionDescriptor* out) const {
  RDMAD_RETURN_IF_ERROR(ValidateRegionName(request.name()));
  RDMAD_ASSIGN_OR_RETURN(auto region,
                         deps_.regions->FindExported(request.name()));
  core::RegionSnapshot snapshot = region->Snapshot();
  const std::string label = absl::StrCat("region '", snapshot.name, "'");
  const std::optional<uint32_t> uid =
      request.has_uid() ? std::optional<uint32_t>(request.uid()) : std::nullopt;
  // The exporter decides: its access list against who is calling (as gRPC
  // verified it) and the uid that caller vouches for.
  const core::ExportAccessList& allow = *snapshot.exported.allow;
  const core::PeerIdentity who = peer::PeerIdentityOf(*context);
  if (!allow.Admits(who, uid)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the export of ", label, " does not admit peer ",
        peer::DescribePeer(who), " acting for ",
        uid.has_value() ? absl::StrCat("uid ", *uid) : std::string("no uid"),
        " (its access list: ", allow.ToString(),
        "): ask its owner to add it (rdmactl export ", snapshot.name,
        " ACCESS --allow [UID@]PEER)"));
  }
  if (request.incarnation() == deps_.identity->incarnation) {
    // A route from this daemon back to itself: the caller is a local user,
    // and the region's own permissions apply to it (see SelfRouteAccess).
    // Anyone can claim to be this daemon; the claim only ever narrows.
    if (!uid.has_value()) {
      return absl::PermissionDeniedError(
          "a Resolve from this daemon to itself must carry the local "
          "caller's uid");
    }
    const core::RemoteAccess access =
        SelfRouteAccess(*region, snapshot.exported.access, *uid);
    if (access == core::RemoteAccess::kNone) {
      return absl::PermissionDeniedError(absl::StrCat(
          "uid ", *uid, " may neither read nor write ", label, " (owner uid ",
          snapshot.owner_uid, ", mode ", core::FormatMode(snapshot.mode),
          "): a route through this daemon's own peer address gives no more "
          "than the region's permissions"));
    }
    snapshot.exported.access = access;
  }
  if (!allow.empty() && !who.address.empty()) {
    // Its data connections carry no certificate: admit its address there.
    region->AdmitDataPeer(who.address);
  }
  ToDescriptor(*deps_.identity, snapshot, out);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PeerService::Resolve(
    grpc::CallbackServerContext* context, const v1::ResolveRequest* request,
    v1::ResolveResponse* response) {
  if (absl::Status s = CheckPeer(context); !s.ok()) return Done(context, s);
  return Done(context,
              ResolveFor(context, *request, response->mutable_region()));
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
      deps_.regions->ListExported(*after, PageSize(request->page_size()));
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
