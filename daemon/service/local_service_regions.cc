// LocalService: listing and describing regions, local and remote, and
// changing a named region's permissions (ListRegions, SetRegionPermissions,
// ListRemoteRegions, StatRegion; a name this daemon does not have is
// looked up in the cluster directory, when there is one, and a descriptor
// is checked with the daemon that issued it).
#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/region_address.h"
#include "daemon/core/access_control.h"
#include "daemon/core/target_grant.h"
#include "daemon/peer/descriptor_codec.h"
#include "daemon/service/local_service.h"
#include "daemon/service/paging.h"
#include "daemon/service/proto_convert.h"
#include "daemon/service/reactor_util.h"
#include "daemon/service/self_route.h"

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

std::string NewDescriptorAdvice(const v1::RegionDescriptor& descriptor,
                                const std::string& peer) {
  return absl::StrCat("get a new one with 'rdmactl descriptor ",
                      descriptor.name().empty() ? std::string("NAME")
                                                : descriptor.name(),
                      "' on the node of ", peer);
}

// Whether `now`, what the daemon at `peer` resolves the descriptor's name
// to today, is still the region and export `descriptor` names: a transfer
// with a descriptor reaches a region by id and key, not by name.
absl::Status StillDescribes(const v1::RegionDescriptor& descriptor,
                            const std::string& peer,
                            const v1::RegionDescriptor& now) {
  if (now.incarnation() != descriptor.incarnation()) {
    return absl::NotFoundError(absl::StrCat(
        "the daemon at ", peer, " restarted since this descriptor was made, "
        "so the region it names is gone: ",
        NewDescriptorAdvice(descriptor, peer)));
  }
  if (now.region_id() != descriptor.region_id()) {
    return absl::NotFoundError(absl::StrCat(
        "the region this descriptor names was freed (the daemon at ", peer,
        " has another region '", descriptor.name(), "' now): ",
        NewDescriptorAdvice(descriptor, peer)));
  }
  if (now.tcp_key() != descriptor.tcp_key()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "region '", descriptor.name(), "' was re-exported since this "
        "descriptor was made, which revoked the descriptor: ",
        NewDescriptorAdvice(descriptor, peer)));
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
    if (auto region = deps_.regions->SnapshotByName(request->name())) {
      ToProto(*region, MayUse(caller, *region), response->add_regions());
    }
    return FinishCall(context, absl::OkStatus());
  }
  auto after = ParseIdToken(request->page_token());
  if (!after.ok()) return FinishCall(context, after.status());
  const core::RegionPage page =
      deps_.regions->ListPage(*after, PageSize(request->page_size()));
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
  auto region = deps_.regions->SetPermissions(
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
  ask.set_incarnation(deps_.identity->incarnation);
  ask.set_page_size(request->page_size());
  ask.set_page_token(request->page_token());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Completes on a gRPC client thread when the peer answers; no thread
  // waits for it.
  deps_.inspector->ListExports(
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
    auto descriptor = peer::DecodeDescriptor(target.encoded_descriptor());
    if (!descriptor.ok()) return FinishCall(context, descriptor.status());
    auto caller = OptionalSession(context);
    if (!caller.ok()) return FinishCall(context, caller.status());
    const std::string peer =
        target.peer().empty() ? descriptor->peer() : target.peer();
    if (descriptor->incarnation() == deps_.identity->incarnation &&
        descriptor->region_id() != 0) {
      absl::Status s = StatOwnDescriptor(*caller, *descriptor, response);
      if (s.ok()) response->set_peer(peer);
      return FinishCall(context, s);
    }
    if (descriptor->name().empty()) {
      // A descriptor of an unnamed region: its daemon resolves names only,
      // so what the descriptor says is all there is to tell.
      response->set_peer(peer);
      v1::ExportedRegion* out = response->mutable_region();
      out->set_name(descriptor->name());
      out->set_length(descriptor->length());
      out->set_access(descriptor->access());
      return FinishCall(context, absl::OkStatus());
    }
    if (absl::Status s = CheckPeerArgument(peer); !s.ok()) {
      return FinishCall(context, s);
    }
    // Asked of its daemon, as a stat of PEER/NAME is: a freed region, or a
    // revoked descriptor, is not reported as there.
    const std::string name = descriptor->name();
    return StatFromPeer(context, *caller, peer, name, response,
                        [d = *std::move(descriptor), peer](
                            const v1::RegionDescriptor& now) {
                          return StillDescribes(d, peer, now);
                        });
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
    auto region = deps_.regions->SnapshotByName(target.name());
    if (!region.has_value() && deps_.directory != nullptr) {
      // Not here: the daemon of the cluster that exports it, as a transfer
      // to this name would find it.
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      deps_.directory->Lookup(
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
  return StatFromPeer(context, *caller, target.peer(), target.name(),
                      response, nullptr);
}

grpc::ServerUnaryReactor* LocalService::StatFromPeer(
    grpc::CallbackServerContext* context, const core::Caller& caller,
    const std::string& peer, const std::string& name,
    v1::StatRegionResponse* response,
    std::function<absl::Status(const v1::RegionDescriptor&)> check) {
  v1::ResolveRequest ask;
  ask.set_name(name);
  ask.set_incarnation(deps_.identity->incarnation);
  if (caller.session_id != 0) {
    // Asked as a transfer asks (GrpcPeerConnector::Resolve): for the uid
    // the kernel gave us. The exporter's access list may name uids, and
    // this daemon's own peer address answers a local user only with the
    // uid, narrowed to what the region's mode grants it (see
    // PeerService::Resolve); without it, that answer is a refusal.
    ask.set_uid(caller.uid);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  deps_.inspector->Resolve(
      peer, ask, PeerDeadline(context),
      [reactor, response, peer, name, check = std::move(check)](
          absl::StatusOr<v1::ResolveResponse> answer) {
        if (answer.ok() && check != nullptr) {
          if (absl::Status s = check(answer->region()); !s.ok()) {
            reactor->Finish(ToGrpcStatus(s));
            return;
          }
        }
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

absl::Status LocalService::StatOwnDescriptor(
    const core::Caller& caller, const v1::RegionDescriptor& descriptor,
    v1::StatRegionResponse* response) const {
  auto region = deps_.regions->FindExportedById(descriptor.region_id());
  if (!region.ok()) return region.status();
  const core::RegionSnapshot snapshot = (*region)->Snapshot();
  if (snapshot.exported.tcp_key != descriptor.tcp_key()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "region '", snapshot.name, "' was re-exported since this descriptor "
        "was made, which revoked the descriptor: ",
        NewDescriptorAdvice(descriptor, deps_.identity->peer_listen)));
  }
  // What a transfer through it may do: the export, within the caller's
  // own permissions (OpenRemote gives a handle the same).
  const auto access = static_cast<core::RemoteAccess>(
      static_cast<uint32_t>(snapshot.exported.access) &
      static_cast<uint32_t>(core::LocalAccessOf(caller, **region)));
  if (access == core::RemoteAccess::kNone) {
    return core::CheckLocalAccess(
        caller, (*region)->acl(), core::kLocalRead,
        absl::StrCat("region '", snapshot.name, "'"));
  }
  v1::ExportedRegion* out = response->mutable_region();
  out->set_name(snapshot.name);
  out->set_length(snapshot.size);
  out->set_access(ToProto(access));
  return absl::OkStatus();
}

}  // namespace rdmad::service
