#include "daemon/service/local_service.h"

#include <unistd.h>

#include <atomic>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/session_wire.h"
#include "daemon/core/access_control.h"
#include "daemon/peer/descriptor_codec.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/proto_convert.h"
#include "daemon/service/session_server.h"
#include "daemon/transport/post_batch.h"

namespace rdmad::service {
namespace {

// Finishes a unary call with `status` and returns its reactor.
grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context,
                               const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

absl::Time DeadlineOf(grpc::CallbackServerContext* context) {
  const auto deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

}  // namespace

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
  return state_->sessions->Authenticate(
      absl::string_view(it->second.data(), it->second.size()));
}

core::Caller LocalService::OptionalSession(
    grpc::CallbackServerContext* context) const {
  auto caller = RequireSession(context);
  if (caller.ok()) return *caller;
  // Anonymous: no session and a uid no region has, so it may manage nothing.
  return core::Caller{0, ~0u, ~0u, 0};
}

grpc::ServerUnaryReactor* LocalService::GetStatus(
    grpc::CallbackServerContext* context, const v1::GetStatusRequest*,
    v1::GetStatusResponse* response) {
  const DaemonIdentity& id = state_->identity;
  response->set_version(id.version);
  response->set_incarnation(id.incarnation);
  response->set_transport(id.transport);
  response->set_transport_reason(id.transport_reason);
  response->set_local_socket(id.local_socket);
  response->set_peer_listen(id.peer_listen);
  response->set_device_count(state_->devices.size());
  const core::RegionTotals totals = state_->regions->Totals();
  response->set_region_count(totals.count);
  response->set_region_bytes(totals.bytes);
  response->set_session_count(state_->sessions->size());
  response->set_peer_count(state_->peers != nullptr ? state_->peers->size() : 0);
  response->set_uptime_ms(absl::ToInt64Milliseconds(absl::Now() - id.started));
  response->set_pid(static_cast<uint32_t>(::getpid()));
  response->set_memlock_limit(id.memlock_limit);
  response->set_max_pinned_bytes(state_->regions->limits().max_pinned_bytes);
  response->set_max_pinned_bytes_source(
      state_->regions->limits().max_pinned_bytes_source);
  response->set_pinned_bytes(totals.pinned_bytes);
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::ListDevices(
    grpc::CallbackServerContext* context, const v1::ListDevicesRequest*,
    v1::ListDevicesResponse* response) {
  for (const auto& device : state_->devices) {
    ToProto(device, response->add_devices());
  }
  if (state_->devices.empty()) {
    response->set_note(
        "no RDMA devices found by libibverbs; this daemon moves data over "
        "its TCP transport");
  }
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::ListPeers(
    grpc::CallbackServerContext* context, const v1::ListPeersRequest*,
    v1::ListPeersResponse* response) {
  if (state_->peers == nullptr) return Done(context, absl::OkStatus());
  for (const peer::PeerSnapshot& p : state_->peers->ListPeers()) {
    v1::PeerInfo* out = response->add_peers();
    out->set_address(p.address);
    out->set_incarnation(p.incarnation);
    out->set_transport(p.transport);
    out->set_transport_reason(p.transport_reason);
    out->set_state(p.state);
    out->set_last_error(p.last_error);
    out->set_bytes_written(p.bytes_written);
    out->set_bytes_read(p.bytes_read);
    out->set_ops_completed(p.ops_completed);
    out->set_ops_failed(p.ops_failed);
  }
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::ListQps(
    grpc::CallbackServerContext* context, const v1::ListQpsRequest*,
    v1::ListQpsResponse* response) {
  if (state_->peers == nullptr) return Done(context, absl::OkStatus());
  for (const peer::ConnectionSnapshot& c : state_->peers->ListConnections()) {
    v1::QpInfo* out = response->add_qps();
    out->set_peer(c.peer);
    out->set_device(c.connection.device);
    out->set_local_qpn(c.connection.local_qpn);
    out->set_remote_qpn(c.connection.remote_qpn);
    out->set_state(c.connection.state);
    out->set_path_mtu(c.connection.path_mtu);
    out->set_posted(c.connection.posted);
    out->set_completed(c.connection.completed);
    out->set_errors(c.connection.errors);
    out->set_outstanding(c.connection.outstanding);
    out->set_post_calls(c.connection.post_calls);
    out->set_generation(c.connection.generation);
    out->set_transport(c.connection.device.empty() ? v1::TRANSPORT_TCP
                                                   : v1::TRANSPORT_VERBS);
    out->set_local_address(c.connection.local_address);
    out->set_remote_address(c.connection.remote_address);
  }
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::AllocateBuffer(
    grpc::CallbackServerContext* context,
    const v1::AllocateBufferRequest* request,
    v1::AllocateBufferResponse* response) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  core::AllocateOptions options;
  options.size = request->size();
  options.name = request->name();
  options.daemon_owned = request->daemon_owned();
  options.export_access = FromProto(request->export_access());
  options.mode = request->mode();
  if (request->has_group()) options.group = request->group();
  auto region = state_->regions->Allocate(*caller, options);
  if (!region.ok()) return Done(context, region.status());
  ToProto((*region)->Snapshot(), true, response->mutable_region());
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::RegisterBuffer(
    grpc::CallbackServerContext* context,
    const v1::RegisterBufferRequest* request,
    v1::RegisterBufferResponse* response) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  auto fd = state_->session_server->TakePassedFd(caller->session_id,
                                                 request->fd_token());
  if (!fd.ok()) return Done(context, fd.status());
  core::AllocateOptions options;
  options.size = request->size();
  options.name = request->name();
  options.export_access = FromProto(request->export_access());
  auto region = state_->regions->Adopt(*caller, *std::move(fd), options);
  if (!region.ok()) return Done(context, region.status());
  ToProto((*region)->Snapshot(), true, response->mutable_region());
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::FreeRegion(
    grpc::CallbackServerContext* context, const v1::FreeRegionRequest* request,
    v1::FreeRegionResponse*) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  auto key = FromProto(request->region());
  if (!key.ok()) return Done(context, key.status());
  return Done(context, state_->regions->Free(*caller, *key));
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
  auto region =
      state_->regions->Export(*caller, *key, FromProto(request->access()));
  if (!region.ok()) return Done(context, region.status());
  ToProto((*region)->Snapshot(), true, response->mutable_region());
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::GetDescriptor(
    grpc::CallbackServerContext* context,
    const v1::GetDescriptorRequest* request,
    v1::GetDescriptorResponse* response) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  auto key = FromProto(request->region());
  if (!key.ok()) return Done(context, key.status());
  // A descriptor lets peers reach the region; hand it only to those who
  // may read it locally.
  auto region = state_->regions->FindForUse(*caller, *key, core::kLocalRead);
  if (!region.ok()) return Done(context, region.status());
  const core::RegionSnapshot snapshot = (*region)->Snapshot();
  if (snapshot.exported.access == core::RemoteAccess::kNone) {
    return Done(context, absl::FailedPreconditionError(absl::StrCat(
                             core::DescribeKey(*key),
                             " is not exported: export it first (rdmactl "
                             "export NAME r|w|rw)")));
  }
  ToDescriptor(state_->identity, snapshot, response->mutable_region());
  response->set_encoded(peer::EncodeDescriptor(response->region()));
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::Transfer(
    grpc::CallbackServerContext* context, const v1::TransferRequest* request,
    v1::TransferResponse* response, core::OpType type) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  auto transfer = FromProto(request->op(), type);
  if (!transfer.ok()) return Done(context, transfer.status());
  transfer->deadline = DeadlineOf(context);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Completes from whichever thread finishes the transfer; no gRPC thread
  // waits for it.
  state_->transfers->Submit(
      *caller, *transfer,
      [reactor, response](absl::StatusOr<core::TransferResult> result) {
        if (result.ok()) {
          response->set_bytes(result->bytes);
          response->set_transport(result->transport == "verbs"
                                      ? v1::TRANSPORT_VERBS
                                  : result->transport == "tcp"
                                      ? v1::TRANSPORT_TCP
                                      : v1::TRANSPORT_UNSPECIFIED);
          response->set_latency_ns(absl::ToInt64Nanoseconds(result->latency));
        }
        reactor->Finish(ToGrpcStatus(result.status()));
      });
  return reactor;
}

grpc::ServerUnaryReactor* LocalService::Write(
    grpc::CallbackServerContext* context, const v1::TransferRequest* request,
    v1::TransferResponse* response) {
  return Transfer(context, request, response, core::OpType::kWrite);
}

grpc::ServerUnaryReactor* LocalService::Read(
    grpc::CallbackServerContext* context, const v1::TransferRequest* request,
    v1::TransferResponse* response) {
  return Transfer(context, request, response, core::OpType::kRead);
}

grpc::ServerUnaryReactor* LocalService::Batch(
    grpc::CallbackServerContext* context, const v1::BatchRequest* request,
    v1::BatchResponse* response) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  constexpr int kMaxBatch = 4096;
  if (request->ops_size() > kMaxBatch) {
    return Done(context, absl::InvalidArgumentError(absl::StrCat(
                             "batch of ", request->ops_size(),
                             " operations; split it into batches of at most ",
                             kMaxBatch)));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const int n = request->ops_size();
  for (int i = 0; i < n; ++i) response->add_results();
  if (n == 0) {
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  struct Pending {
    std::atomic<int> left;
    std::atomic<uint64_t> bytes{0};
  };
  auto pending = std::make_shared<Pending>();
  pending->left = n;
  const absl::Time deadline = DeadlineOf(context);
  // Operations that reach a channel while this loop runs are held back and
  // posted together at its end: on verbs, a chain per QP, not a doorbell
  // per operation.
  transport::PostBatch post_batch;
  for (int i = 0; i < n; ++i) {
    const v1::TransferOp& op = request->ops(i);
    v1::OpStatus* slot = response->mutable_results(i);
    auto complete = [reactor, response, pending, slot](
                        absl::StatusOr<core::TransferResult> result) {
      if (result.ok()) {
        pending->bytes += result->bytes;
      } else {
        slot->set_code(static_cast<int32_t>(result.status().code()));
        slot->set_message(std::string(result.status().message()));
      }
      if (pending->left.fetch_sub(1) == 1) {
        response->set_bytes(pending->bytes.load());
        reactor->Finish(grpc::Status::OK);
      }
    };
    if (op.op() != v1::OP_WRITE && op.op() != v1::OP_READ) {
      complete(absl::InvalidArgumentError(
          "batch operation needs op = OP_WRITE or OP_READ"));
      continue;
    }
    auto transfer = FromProto(
        op, op.op() == v1::OP_WRITE ? core::OpType::kWrite : core::OpType::kRead);
    if (!transfer.ok()) {
      complete(transfer.status());
      continue;
    }
    transfer->deadline = deadline;
    state_->transfers->Submit(*caller, *transfer, std::move(complete));
  }
  return reactor;
}

}  // namespace rdmad::service
