// LocalService: listing and describing regions, local and remote, and
// changing a named region's permissions (ListRegions, SetRegionPermissions,
// ListRemoteRegions, StatRegion; a name this daemon does not have is
// looked up in the cluster directory, when there is one).
#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/region_address.h"
#include "daemon/core/access_control.h"
#include "daemon/peer/descriptor_codec.h"
#include "daemon/service/local_service.h"
#include "daemon/service/paging.h"
#include "daemon/service/proto_convert.h"
#include "daemon/service/reactor_util.h"

namespace rdmad::service {
namespace {

// The longest this daemon waits for another one on a client's behalf.
constexpr absl::Duration kPeerCallTimeout = absl::Seconds(20);

absl::Time PeerDeadline(grpc::CallbackServerContext* context) {
  return std::min(CallDeadline(context), absl::Now() + kPeerCallTimeout);
}

// Keys are shown to whoever may use the region.
bool MayUse(const core::Caller& caller, const core::RegionSnapshot& region) {
  if (caller.uid == 0) return true;
  if (region.owner == core::RegionOwnerKind::kSession) {
    return region.session_id == caller.session_id && caller.session_id != 0;
  }
  return core::PermittedBits(caller, core::RegionAcl{region.owner_uid,
                                                     region.owner_gid,
                                                     region.mode}) != 0;
}

absl::Status CheckPeerArgument(const std::string& peer) {
  if (absl::Status s = ValidatePeerAddress(peer); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("peer: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

grpc::ServerUnaryReactor* LocalService::ListRegions(
    grpc::CallbackServerContext* context,
    const v1::ListRegionsRequest* request,
    v1::ListRegionsResponse* response) {
  auto session = OptionalSession(context);
  if (!session.ok()) return FinishCall(context, session.status());
  const core::Caller& caller = *session;
  if (!request->name().empty()) {
    if (absl::Status s = ValidateRegionName(request->name()); !s.ok()) {
      return FinishCall(context, s);
    }
    if (auto region = state_->regions->SnapshotByName(request->name())) {
      ToProto(*region, MayUse(caller, *region), response->add_regions());
    }
    return FinishCall(context, absl::OkStatus());
  }
  auto after = ParseIdToken(request->page_token());
  if (!after.ok()) return FinishCall(context, after.status());
  const core::RegionPage page =
      state_->regions->ListPage(*after, PageSize(request->page_size()));
  for (const core::RegionSnapshot& region : page.regions) {
    ToProto(region, MayUse(caller, region), response->add_regions());
  }
  if (page.more && !page.regions.empty()) {
    response->set_next_page_token(IdToken(page.regions.back().id));
  }
  return FinishCall(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::SetRegionPermissions(
    grpc::CallbackServerContext* context,
    const v1::SetRegionPermissionsRequest* request,
    v1::SetRegionPermissionsResponse* response) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return FinishCall(context, caller.status());
  auto key = FromProto(request->region());
  if (!key.ok()) return FinishCall(context, key.status());
  auto region = state_->regions->SetPermissions(
      *caller, *key,
      request->has_mode() ? std::optional<uint32_t>(request->mode())
                          : std::nullopt,
      request->has_group() ? std::optional<uint32_t>(request->group())
                           : std::nullopt);
  if (!region.ok()) return FinishCall(context, region.status());
  ToProto((*region)->Snapshot(), true, response->mutable_region());
  return FinishCall(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::ListRemoteRegions(
    grpc::CallbackServerContext* context,
    const v1::ListRemoteRegionsRequest* request,
    v1::ListRemoteRegionsResponse* response) {
  if (absl::Status s = CheckPeerArgument(request->peer()); !s.ok()) {
    return FinishCall(context, s);
  }
  v1::ListExportsRequest ask;
  ask.set_incarnation(state_->identity.incarnation);
  ask.set_page_size(request->page_size());
  ask.set_page_token(request->page_token());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Completes on a gRPC client thread when the peer answers; no thread
  // waits for it.
  inspector_.ListExports(
      request->peer(), ask, PeerDeadline(context),
      [reactor, response,
       token = request->page_token()](
          absl::StatusOr<v1::ListExportsResponse> answer) {
        if (!answer.ok()) {
          reactor->Finish(ToGrpcStatus(answer.status()));
          return;
        }
        // Another daemon's answer, not trusted: only well-formed names go
        // on (they end up on terminals), and a page that does not move on
        // ends the listing rather than loop the client forever.
        for (v1::ExportedRegion& region : *answer->mutable_regions()) {
          if (ValidateRegionName(region.name()).ok()) {
            *response->add_regions() = std::move(region);
          }
        }
        const std::string& next = answer->next_page_token();
        if (!next.empty() && next != token && answer->regions_size() > 0) {
          response->set_next_page_token(PrintableFromPeer(next));
        }
        reactor->Finish(grpc::Status::OK);
      });
  return reactor;
}

grpc::ServerUnaryReactor* LocalService::StatRegion(
    grpc::CallbackServerContext* context, const v1::StatRegionRequest* request,
    v1::StatRegionResponse* response) {
  const v1::RemoteRegion& target = request->region();
  if (target.ref_case() == v1::RemoteRegion::kEncodedDescriptor) {
    // What the descriptor says; no daemon needs asking.
    auto descriptor = peer::DecodeDescriptor(target.encoded_descriptor());
    if (!descriptor.ok()) return FinishCall(context, descriptor.status());
    response->set_peer(target.peer().empty() ? descriptor->peer()
                                             : target.peer());
    v1::ExportedRegion* out = response->mutable_region();
    out->set_name(descriptor->name());
    out->set_length(descriptor->length());
    out->set_access(descriptor->access());
    return FinishCall(context, absl::OkStatus());
  }
  if (target.ref_case() != v1::RemoteRegion::kName) {
    return FinishCall(context,
                      absl::InvalidArgumentError(
                          "no region given: name it, or pass a descriptor"));
  }
  if (absl::Status s = ValidateRegionName(target.name()); !s.ok()) {
    return FinishCall(context, s);
  }
  if (target.peer().empty()) {
    auto region = state_->regions->SnapshotByName(target.name());
    if (!region.has_value() && state_->directory != nullptr) {
      // Not here: the daemon of the cluster that exports it, as a transfer
      // to this name would find it.
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      state_->directory->Lookup(
          target.name(), PeerDeadline(context), /*fresh=*/false,
          [reactor, response](absl::StatusOr<core::DirectoryEntry> entry,
                              bool) {
            if (entry.ok()) {
              response->set_peer(entry->node);
              v1::ExportedRegion* out = response->mutable_region();
              out->set_name(entry->name);
              out->set_length(entry->size);
              out->set_access(ToProto(entry->access));
            }
            reactor->Finish(ToGrpcStatus(entry.status()));
          });
      return reactor;
    }
    if (!region.has_value()) {
      return FinishCall(context, absl::NotFoundError(absl::StrCat(
                                     "no region named '", target.name(),
                                     "' on this daemon (see rdmactl "
                                     "regions)")));
    }
    v1::ExportedRegion* out = response->mutable_region();
    out->set_name(region->name);
    out->set_length(region->size);
    out->set_access(ToProto(region->exported.access));
    return FinishCall(context, absl::OkStatus());
  }
  if (absl::Status s = CheckPeerArgument(target.peer()); !s.ok()) {
    return FinishCall(context, s);
  }
  auto caller = OptionalSession(context);
  if (!caller.ok()) return FinishCall(context, caller.status());
  v1::ResolveRequest ask;
  ask.set_name(target.name());
  ask.set_incarnation(state_->identity.incarnation);
  if (caller->session_id != 0) {
    // Asked as a transfer asks (GrpcPeerConnector::Resolve): for the uid
    // the kernel gave us. The exporter's access list may name uids, and
    // this daemon's own peer address answers a local user only with the
    // uid, narrowed to what the region's mode grants it (see
    // PeerService::Resolve); without it, that answer is a refusal.
    ask.set_uid(caller->uid);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string peer = target.peer();
  inspector_.Resolve(
      peer, ask, PeerDeadline(context),
      [reactor, response, peer, name = target.name()](
          absl::StatusOr<v1::ResolveResponse> answer) {
        if (answer.ok()) {
          // Only what a person needs: keys stay inside the daemon. The
          // name is the one asked for (the peer's copy is not trusted).
          response->set_peer(peer);
          v1::ExportedRegion* out = response->mutable_region();
          out->set_name(name);
          out->set_length(answer->region().length());
          out->set_access(answer->region().access());
        }
        reactor->Finish(ToGrpcStatus(answer.status()));
      });
  return reactor;
}

}  // namespace rdmad::service
