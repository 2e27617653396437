// LocalService: the calls of the shared-memory data path — queues and
// remote handles (see common/queue_layout.h and daemon/ring/).
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/target_grant.h"
#include "daemon/service/call_helpers.h"
#include "daemon/service/local_service.h"
#include "daemon/service/paging.h"
#include "daemon/service/proto_convert.h"
#include "daemon/service/self_route.h"
#include "daemon/service/transfer_decoder.h"

namespace rdmad::service {
namespace {

constexpr uint32_t kDefaultSubmissionEntries = 256;

constexpr absl::Duration kDefaultOpTimeout = absl::Seconds(30);
constexpr absl::Duration kMaxOpTimeout = absl::Hours(1);

}  // namespace

grpc::ServerUnaryReactor* LocalService::OpenQueue(
    grpc::CallbackServerContext* context, const v1::OpenQueueRequest* request,
    v1::OpenQueueResponse* response) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  if (deps_.queues == nullptr) {
    return Done(context, absl::UnimplementedError(
                             "this daemon has no shared-memory queues"));
  }
  for (uint32_t n : {request->submission_entries(),
                     request->completion_entries()}) {
    if (n > queue::kMaxEntries) {
      return Done(context, absl::InvalidArgumentError(absl::StrCat(
                               "a ring of ", n, " entries: at most ",
                               queue::kMaxEntries)));
    }
  }
  ring::RingQueueOptions options;
  options.submission_entries = request->submission_entries() != 0
                                   ? request->submission_entries()
                                   : kDefaultSubmissionEntries;
  options.completion_entries = request->completion_entries() != 0
                                   ? request->completion_entries()
                                   : 2 * options.submission_entries;
  options.default_timeout =
      request->default_timeout_ms() != 0
          ? std::min(absl::Milliseconds(request->default_timeout_ms()),
                     kMaxOpTimeout)
          : kDefaultOpTimeout;
  options.notifications = request->notifications();
  auto queue = deps_.queues->OpenQueue(*caller, options);
  if (!queue.ok()) return Done(context, queue.status());
  response->set_queue_id(queue->id);
  response->set_submission_entries(queue->geometry.sq_entries);
  response->set_completion_entries(queue->geometry.cq_entries);
  response->set_segment_size(queue->segment_size);
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::CloseQueue(
    grpc::CallbackServerContext* context, const v1::CloseQueueRequest* request,
    v1::CloseQueueResponse*) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  if (deps_.queues == nullptr) {
    return Done(context, absl::NotFoundError("no such queue"));
  }
  return Done(context,
              deps_.queues->Close(caller->session_id, request->queue_id()));
}

grpc::ServerUnaryReactor* LocalService::ListQueues(
    grpc::CallbackServerContext* context, const v1::ListQueuesRequest* request,
    v1::ListQueuesResponse* response) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  auto after = ParseIdToken(request->page_token());
  if (!after.ok()) return Done(context, after.status());
  const size_t page = PageSize(request->page_size());
  if (deps_.queues == nullptr) return Done(context, absl::OkStatus());
  for (const ring::QueueSnapshot& q : deps_.queues->List()) {
    // A user sees the queues of its own uid, as ps(1) under hidepid would
    // show its own processes; root sees all.
    if (q.id <= *after) continue;
    if (caller->uid != 0 && q.caller.uid != caller->uid) continue;
    if (static_cast<size_t>(response->queues_size()) == page) {
      response->set_next_page_token(
          IdToken(response->queues(response->queues_size() - 1).queue_id()));
      break;
    }
    v1::QueueInfo* info = response->add_queues();
    info->set_queue_id(q.id);
    info->set_session_id(q.caller.session_id);
    info->set_pid(q.caller.pid);
    info->set_uid(q.caller.uid);
    info->set_submission_entries(q.geometry.sq_entries);
    info->set_completion_entries(q.geometry.cq_entries);
    info->set_notifications(q.notifications);
    info->set_engine(q.engine);
    info->set_opened_unix_ms(absl::ToUnixMillis(q.stats.opened));
    info->set_in_flight(q.stats.in_flight);
    info->set_submitted(q.stats.submitted);
    info->set_completed(q.stats.completed);
    info->set_failed(q.stats.failed);
    info->set_notified(q.stats.notified);
    info->set_client_wakeups(q.stats.client_wakeups);
    info->set_doorbells(q.stats.doorbells);
    info->set_notifications_held(q.stats.held);
    info->set_notifications_lost(q.stats.lost);
    if (!q.stats.stop_reason.ok()) {
      info->set_stopped(true);
      info->set_stop_code(static_cast<int32_t>(q.stats.stop_reason.code()));
      info->set_stop_message(std::string(q.stats.stop_reason.message()));
    }
  }
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* LocalService::OpenRemote(
    grpc::CallbackServerContext* context, const v1::OpenRemoteRequest* request,
    v1::OpenRemoteResponse* response) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  if (deps_.queues == nullptr) {
    return Done(context, absl::UnimplementedError(
                             "this daemon has no shared-memory queues"));
  }
  auto decoded = DecodeRemoteRegion(request->remote());
  if (!decoded.ok()) return Done(context, decoded.status());
  core::TransferTarget target = *std::move(decoded);
  RouteToSelf(*deps_.identity, &target);
  auto session_handles = deps_.queues->HandlesOf(caller->session_id);
  if (!session_handles.ok()) return Done(context, session_handles.status());
  std::shared_ptr<ring::RemoteHandles> handles = *std::move(session_handles);
  auto grant = core::GrantTarget(
      *caller, target, *deps_.regions,
      {.directory = deps_.directory != nullptr,
       .peers = deps_.peers != nullptr});
  if (!grant.ok()) return Done(context, grant.status());
  auto add = [handles, response](core::TransferTarget target, uint64_t size,
                                 core::RemoteAccess access,
                                 core::TransportKind transport) -> absl::Status {
    ring::RemoteHandle handle;
    handle.target = std::move(target);
    handle.size = size;
    handle.access = access;
    handle.transport = transport;
    auto added = handles->Add(std::move(handle));
    if (!added.ok()) return added.status();
    const ring::RemoteHandle& h = **added;
    response->set_handle(h.id);
    response->set_size(h.size);
    response->set_access(ToProto(h.access));
    response->set_transport(ToProto(h.transport));
    response->set_peer(h.target.peer);
    response->set_name(h.target.descriptor != nullptr
                           ? h.target.descriptor->name
                           : h.target.name);
    return absl::OkStatus();
  };
  switch (grant->route) {
    case core::TargetRoute::kSelfExport:
    case core::TargetRoute::kLocalName:
      return Done(context, add(std::move(target), grant->size, grant->access,
                               grant->transport));
    case core::TargetRoute::kDirectory: {
      // Operations on the handle go to the holder through the directory,
      // one look-up each (from its cache), so they follow the region when
      // it moves.
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      deps_.directory->Resolve(
          target.name, DeadlineOf(context), {},
          [reactor, add, target](
              absl::StatusOr<core::DirectoryEntry> entry) mutable {
            if (!entry.ok()) {
              reactor->Finish(ToGrpcStatus(entry.status()));
              return;
            }
            reactor->Finish(ToGrpcStatus(add(std::move(target), entry->size,
                                             entry->access,
                                             core::TransportKind::kNone)));
          });
      return reactor;
    }
    case core::TargetRoute::kPeer:
      break;
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  deps_.peers->Resolve(
      target, caller->uid, DeadlineOf(context),
      [reactor, add, target](
          absl::StatusOr<peer::TransferFlow::Resolved> resolved) mutable {
        if (!resolved.ok()) {
          reactor->Finish(ToGrpcStatus(resolved.status()));
          return;
        }
        reactor->Finish(ToGrpcStatus(add(
            std::move(target), resolved->region->length,
            resolved->region->access, resolved->transport)));
      });
  return reactor;
}

grpc::ServerUnaryReactor* LocalService::CloseRemote(
    grpc::CallbackServerContext* context,
    const v1::CloseRemoteRequest* request, v1::CloseRemoteResponse*) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  if (deps_.queues == nullptr) {
    return Done(context, absl::NotFoundError("no such handle"));
  }
  auto handles = deps_.queues->HandlesOf(caller->session_id);
  if (!handles.ok()) return Done(context, handles.status());
  return Done(context, (*handles)->Remove(request->handle()));
}

}  // namespace rdmad::service
