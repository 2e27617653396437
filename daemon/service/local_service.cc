#include "daemon/service/local_service.h"

#include <unistd.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/region_address.h"
#include "common/session_wire.h"
#include "common/status_macros.h"
#include "daemon/core/access_control.h"
#include "daemon/peer/descriptor_codec.h"
#include "daemon/service/call_helpers.h"
#include "daemon/service/directory_calls.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/proto_convert.h"

namespace rdmad::service {

absl::StatusOr<core::Caller> LocalService::RequireSession(
    grpc::CallbackServerContext* context) const {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find(session_wire::kSessionMetadataKey);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "this call needs a session: open one on the session socket (the "
        "client library and rdmactl do this) and send its token as "
        "'rdmad-session' metadata");
  }
  const absl::string_view token(it->second.data(), it->second.size());
  if (deps_.credentials_of == nullptr) {
    return deps_.sessions->Authenticate(token);
  }
  // The token must come from the process it was issued to: the one at the
  // other end of the connection this call arrived on, as the kernel says.
  RDMAD_ASSIGN_OR_RETURN(const local_socket::ConnectionCredentials connection,
                         deps_.credentials_of(context->peer()));
  return deps_.sessions->AuthenticateFrom(token, connection.pid,
                                          connection.uid);
}

absl::StatusOr<core::Caller> LocalService::OptionalSession(
    grpc::CallbackServerContext* context) const {
  if (context->client_metadata().count(session_wire::kSessionMetadataKey) !=
      0) {
    // A token that is not this process's is refused, not ignored.
    return RequireSession(context);
  }
  // Anonymous: no session and a uid no region has, so it may manage nothing.
  return core::Caller{0, ~0u, ~0u, 0};
}

grpc::ServerUnaryReactor* LocalService::ExportClaimed(
    grpc::CallbackServerContext* context, const core::Caller& caller,
    const core::Region& region, bool undo_frees) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (region.exported().access == core::RemoteAccess::kNone) {
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  // The name must be this daemon's in the whole cluster; if it is not, the
  // call fails and leaves no export behind.
  core::RegionTable* regions = deps_.regions;
  const core::RegionKey key{region.id(), ""};
  directory_calls_.FinishAfterClaim(
      reactor, region.name(), DeadlineOf(context),
      [regions, caller, key, undo_frees] {
        if (undo_frees) {
          (void)regions->Free(caller, key);
        } else {
          (void)regions->Export(caller, key, core::RemoteAccess::kNone);
        }
      });
  return reactor;
}

grpc::ServerUnaryReactor* LocalService::GetStatus(
    grpc::CallbackServerContext* context, const v1::GetStatusRequest*,
    v1::GetStatusResponse* response) {
  // No session needed; but a token sent must be this process's.
  if (auto session = OptionalSession(context); !session.ok()) {
    return Done(context, session.status());
  }
  const DaemonIdentity& id = *deps_.identity;
  response->set_version(id.version);
  response->set_incarnation(id.incarnation);
  response->set_transport(ToProto(id.transport));
  response->set_transport_reason(id.transport_reason);
  response->set_local_socket(id.local_socket);
  response->set_peer_listen(id.peer_listen);
  response->set_device_count(deps_.devices->size());
  const core::RegionTotals totals = deps_.regions->Totals();
  response->set_region_count(totals.count);
  response->set_region_bytes(totals.bytes);
  response->set_session_count(deps_.sessions->size());
  response->set_peer_count(deps_.peers != nullptr ? deps_.peers->size() : 0);
  response->set_uptime_ms(absl::ToInt64Milliseconds(absl::Now() - id.started));
  response->set_pid(static_cast<uint32_t>(::getpid()));
  response->set_memlock_limit(id.memlock_limit);
  response->set_max_pinned_bytes(deps_.regions->limits().max_pinned_bytes);
  response->set_max_pinned_bytes_source(
      deps_.regions->limits().max_pinned_bytes_source);
  response->set_pinned_bytes(totals.pinned_bytes);
  response->set_data_listen(id.data_listen);
  if (const std::string metrics = deps_.metrics_address != nullptr
                                      ? deps_.metrics_address->Get()
                                      : std::string();
      !metrics.empty()) {
    response->set_metrics_url(absl::StrCat("http://", metrics, "/metrics"));
  }
  response->set_config_file(id.config_file);
  for (const auto& device : *deps_.devices) {
    if (device.dmabuf) response->add_dmabuf_devices(device.name);
  }
  if (deps_.directory != nullptr) {
    ToProto(deps_.directory->state(), response->mutable_directory());
  }
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::ListDevices(
    grpc::CallbackServerContext* context, const v1::ListDevicesRequest*,
    v1::ListDevicesResponse* response) {
  // No session needed; but a token sent must be this process's.
  if (auto session = OptionalSession(context); !session.ok()) {
    return Done(context, session.status());
  }
  std::vector<transport::ConnectAcceptor::NoticeQueue> queues;
  if (deps_.verbs_acceptor != nullptr) {
    queues = deps_.verbs_acceptor->NoticeQueues();
  }
  for (const auto& device : *deps_.devices) {
    v1::DeviceInfo* out = response->add_devices();
    ToProto(device, out);
    for (const auto& q : queues) {
      if (q.device != device.name) continue;
      v1::NoticeReceiveQueue* notices = out->mutable_notice_receives();
      notices->set_depth(q.depth);
      notices->set_posted(q.posted);
      notices->set_reposts(q.reposts);
    }
  }
  if (deps_.devices->empty()) {
    response->set_note(
        "no RDMA devices found by libibverbs; this daemon moves data over "
        "its TCP transport");
  }
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::ListPeers(
    grpc::CallbackServerContext* context, const v1::ListPeersRequest*,
    v1::ListPeersResponse* response) {
  // No session needed; but a token sent must be this process's.
  if (auto session = OptionalSession(context); !session.ok()) {
    return Done(context, session.status());
  }
  if (deps_.peers == nullptr) return Done(context, absl::OkStatus());
  for (const peer::PeerSnapshot& p : deps_.peers->ListPeers()) {
    v1::PeerInfo* out = response->add_peers();
    out->set_address(p.address);
    out->set_incarnation(p.incarnation);
    out->set_transport(ToProto(p.transport));
    out->set_transport_reason(p.transport_reason);
    out->set_state(std::string(
        p.state == peer::PeerState::kReady
            ? transport::ChannelStateName(p.channel_state)
            : peer::PeerStateName(p.state)));
    out->set_last_error(p.last_error);
    out->set_bytes_written(p.bytes_written);
    out->set_bytes_read(p.bytes_read);
    out->set_ops_completed(p.ops_completed);
    out->set_ops_failed(p.ops_failed);
    for (const transport::RailInfo& r : p.rails) {
      v1::RailInfo* rail = out->add_rails();
      rail->set_index(r.index);
      rail->set_device(r.device);
      rail->set_port(r.port);
      rail->set_remote_device(r.remote_device);
      rail->set_state(std::string(transport::RailStatusName(r.state)));
      rail->set_bytes(r.bytes);
      rail->set_ops(r.ops);
      rail->set_errors(r.errors);
      rail->set_pauses(r.pauses);
      rail->set_paused_ms_left(
          static_cast<uint64_t>(absl::ToInt64Milliseconds(r.paused_left)));
      rail->set_bandwidth_bytes_per_second(static_cast<uint64_t>(r.bandwidth));
      rail->set_outstanding_bytes(r.outstanding_bytes);
      rail->set_port_active(r.port_active);
      rail->set_numa_node(r.numa_node);
      rail->set_last_error(r.last_error);
    }
  }
  return Done(context, absl::OkStatus());
}

namespace {

void FillQpInfo(const std::string& peer, core::TransportKind kind,
                const transport::ConnectionInfo& c, const char* role,
                v1::QpInfo* out) {
  out->set_peer(peer);
  out->set_role(role);
  out->set_transport(ToProto(kind));
  out->set_device(c.device);
  // The proto's local_qpn carries a TCP connection's index: TCP has no QPN.
  out->set_local_qpn(kind == core::TransportKind::kTcp ? c.index
                                                       : c.local_qpn);
  out->set_remote_qpn(c.remote_qpn);
  out->set_state(c.qp_state.empty()
                     ? std::string(transport::ConnectionStateName(c.state))
                     : c.qp_state);
  out->set_path_mtu(c.path_mtu);
  out->set_posted(c.posted);
  out->set_completed(c.completed);
  out->set_errors(c.errors);
  out->set_outstanding(c.outstanding);
  out->set_post_calls(c.post_calls);
  out->set_generation(c.generation);
  out->set_rail(c.rail);
  out->set_local_address(c.local_address);
  out->set_remote_address(c.remote_address);
}

}  // namespace

grpc::ServerUnaryReactor* LocalService::ListQps(
    grpc::CallbackServerContext* context, const v1::ListQpsRequest*,
    v1::ListQpsResponse* response) {
  // No session needed; but a token sent must be this process's.
  if (auto session = OptionalSession(context); !session.ok()) {
    return Done(context, session.status());
  }
  if (deps_.peers != nullptr) {
    for (const peer::ConnectionSnapshot& c :
         deps_.peers->ListConnections()) {
      FillQpInfo(c.peer, c.transport, c.connection, "initiator",
                 response->add_qps());
    }
  }
  for (const transport::ConnectAcceptor* acceptor :
       {deps_.tcp_acceptor, deps_.verbs_acceptor}) {
    if (acceptor == nullptr) continue;
    for (const auto& served : acceptor->ListServed()) {
      FillQpInfo(served.peer, acceptor->kind(), served.connection,
                 "responder", response->add_qps());
    }
  }
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::AllocateBuffer(
    grpc::CallbackServerContext* context,
    const v1::AllocateBufferRequest* request,
    v1::AllocateBufferResponse* response) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  auto access = AccessFromProto(request->export_access(), "export_access");
  if (!access.ok()) return Done(context, access.status());
  core::AllocateOptions options;
  options.size = request->size();
  options.name = request->name();
  options.daemon_owned = request->daemon_owned();
  options.export_access = *access;
  options.mode = request->mode();
  if (request->has_group()) options.group = request->group();
  auto region = deps_.regions->Allocate(*caller, options);
  if (!region.ok()) return Done(context, region.status());
  ToProto((*region)->Snapshot(), true, response->mutable_region());
  return ExportClaimed(context, *caller, **region, /*undo_frees=*/true);
}

namespace {

// What RegisterBuffer and RegisterDmabuf check before the passed descriptor
// is taken, so that a bad request does not cost the client its descriptor:
// the token, the size (`size_field` names it), the name, the access, and
// that an export has a name to be found by.
absl::StatusOr<core::AllocateOptions> ClientMemoryOptions(
    uint64_t fd_token, uint64_t size, const std::string& name,
    v1::Access export_access, absl::string_view what,
    absl::string_view size_field) {
  if (fd_token == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fd_token is 0: pass the ", what,
                     " on the session socket first and use the token it "
                     "answers"));
  }
  if (size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(size_field, " is 0: register at least one byte"));
  }
  if (!name.empty()) RDMAD_RETURN_IF_ERROR(ValidateRegionName(name));
  RDMAD_ASSIGN_OR_RETURN(core::RemoteAccess access,
                         AccessFromProto(export_access, "export_access"));
  core::AllocateOptions options;
  options.size = size;
  options.name = name;
  options.export_access = access;
  // Only named regions can be exported: refused now, not after the
  // descriptor was taken.
  RDMAD_RETURN_IF_ERROR(core::CheckExportHasName(options));
  return options;
}

}  // namespace

grpc::ServerUnaryReactor* LocalService::RegisterBuffer(
    grpc::CallbackServerContext* context,
    const v1::RegisterBufferRequest* request,
    v1::RegisterBufferResponse* response) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  auto options =
      ClientMemoryOptions(request->fd_token(), request->size(), request->name(),
                          request->export_access(), "memfd", "size");
  if (!options.ok()) return Done(context, options.status());
  return AdoptPassed(
      context, *caller, request->fd_token(),
      [&](UniqueFd fd) {
        return deps_.regions->Adopt(*caller, std::move(fd), *options);
      },
      response->mutable_region());
}

grpc::ServerUnaryReactor* LocalService::RegisterDmabuf(
    grpc::CallbackServerContext* context,
    const v1::RegisterDmabufRequest* request,
    v1::RegisterDmabufResponse* response) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  auto options = ClientMemoryOptions(request->fd_token(), request->length(),
                                     request->name(), request->export_access(),
                                     "dma-buf", "length");
  if (!options.ok()) return Done(context, options.status());
  return AdoptPassed(
      context, *caller, request->fd_token(),
      [&](UniqueFd fd) {
        return deps_.regions->AdoptDmabuf(*caller, std::move(fd),
                                            request->offset(), *options);
      },
      response->mutable_region());
}

grpc::ServerUnaryReactor* LocalService::AdoptPassed(
    grpc::CallbackServerContext* context, const core::Caller& caller,
    uint64_t fd_token,
    absl::FunctionRef<absl::StatusOr<std::shared_ptr<core::Region>>(UniqueFd)>
        adopt,
    v1::RegionInfo* out) {
  auto fd = deps_.take_passed_fd(caller.session_id, fd_token);
  if (!fd.ok()) return Done(context, fd.status());
  auto region = adopt(*std::move(fd));
  if (!region.ok()) return Done(context, region.status());
  ToProto((*region)->Snapshot(), true, out);
  return ExportClaimed(context, caller, **region, /*undo_frees=*/true);
}

grpc::ServerUnaryReactor* LocalService::FreeRegion(
    grpc::CallbackServerContext* context, const v1::FreeRegionRequest* request,
    v1::FreeRegionResponse*) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  auto key = FromProto(request->region());
  if (!key.ok()) return Done(context, key.status());
  return Done(context, deps_.regions->Free(*caller, *key));
}

grpc::ServerUnaryReactor* LocalService::ExportRegion(
    grpc::CallbackServerContext* context,
    const v1::ExportRegionRequest* request,
    v1::ExportRegionResponse* response) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  auto key = FromProto(request->region());
  if (!key.ok()) return Done(context, key.status());
  if (!v1::Access_IsValid(request->access())) {
    return Done(context, absl::InvalidArgumentError(absl::StrCat(
                             "unknown access value ", request->access(),
                             ": use ACCESS_NONE, ACCESS_READ, ACCESS_WRITE "
                             "or ACCESS_READ_WRITE")));
  }
  auto allow = FromProto(request->allow());
  if (!allow.ok()) return Done(context, allow.status());
  auto region = deps_.regions->Export(
      *caller, *key, FromProto(request->access()), *std::move(allow));
  if (!region.ok()) return Done(context, region.status());
  ToProto((*region)->Snapshot(), true, response->mutable_region());
  return ExportClaimed(context, *caller, **region, /*undo_frees=*/false);
}

grpc::ServerUnaryReactor* LocalService::GetDescriptor(
    grpc::CallbackServerContext* context,
    const v1::GetDescriptorRequest* request,
    v1::GetDescriptorResponse* response) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  auto key = FromProto(request->region());
  if (!key.ok()) return Done(context, key.status());
  // A descriptor lets whoever holds it do what the export grants, from any
  // peer: hand it only to those who may do all of that locally, or a reader
  // could write through it from another daemon.
  auto region = deps_.regions->FindForUse(*caller, *key, core::kLocalRead);
  if (!region.ok()) return Done(context, region.status());
  const core::RegionSnapshot snapshot = (*region)->Snapshot();
  if (snapshot.exported.access == core::RemoteAccess::kNone) {
    return Done(context, absl::FailedPreconditionError(absl::StrCat(
                             core::DescribeKey(*key),
                             " is not exported: export it first (rdmactl "
                             "export NAME r|w|rw)")));
  }
  if (core::Allows(snapshot.exported.access, core::RemoteAccess::kWrite)) {
    auto writable =
        deps_.regions->FindForUse(*caller, *key, core::kLocalReadWrite);
    if (!writable.ok()) {
      return Done(context, absl::PermissionDeniedError(absl::StrCat(
                               writable.status().message(),
                               "; its descriptor grants remote write, so "
                               "only those who may write it locally get it")));
    }
  }
  ToDescriptor(*deps_.identity, snapshot, response->mutable_region());
  response->set_encoded(peer::EncodeDescriptor(response->region()));
  return Done(context, absl::OkStatus());
}

}  // namespace rdmad::service
