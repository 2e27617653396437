// Implementation of include/rdmad/client.h: transfers (Write, Read, Batch
// on the shared queue) and the calls of the queue data path (OpenQueue,
// OpenRemote).
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/client_impl.h"
#include "client/convert.h"
#include "client/queue_impl.h"
#include "client/session_link.h"
#include "client/shared_queue.h"
#include "common/queue_layout.h"
#include "common/session_wire.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad {

using client_internal::CloseQueueIn;
using client_internal::FromGrpc;
using client_internal::FromProto;
using client_internal::SessionLink;
using client_internal::ToProto;

namespace {

absl::Status DeadlinePassed() {
  return absl::DeadlineExceededError(
      "the time given for this work (its deadline) has passed");
}

}  // namespace

absl::Status Client::PrepareToRun(absl::Span<const Op> ops) {
  // After a daemon restart: a new session first, so that Usable sees it
  // and the shared queue opens a new queue in it.
  RDMAD_RETURN_IF_ERROR(impl_->link->Refresh().status());
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const bool has_remote = std::visit(
        [](const auto* remote) { return remote != nullptr; }, op.remote);
    if (op.local == nullptr || !has_remote) {
      return absl::InvalidArgumentError(absl::StrCat(
          "operation ", i, " (tag ", op.tag, ") of ", ops.size(),
          op.local == nullptr ? " has no local buffer of this client"
                              : " names no remote region (a RemoteRegion or "
                                "a RemoteHandle from OpenRemote)",
          ": nothing was run"));
    }
    RDMAD_RETURN_IF_ERROR(Usable(*op.local));
  }
  return absl::OkStatus();
}

absl::StatusOr<Completion> Client::Transfer(Op::Kind kind, const Buffer& local,
                                            uint64_t local_offset,
                                            const RemoteRegion& remote,
                                            uint64_t remote_offset,
                                            uint64_t length) {
  const Op op{.kind = kind,
              .local = &local,
              .local_offset = local_offset,
              .remote = &remote,
              .remote_offset = remote_offset,
              .length = length};
  RDMAD_ASSIGN_OR_RETURN(std::vector<Completion> done,
                         Batch(absl::MakeConstSpan(&op, 1)));
  if (!done[0].status.ok()) return std::move(done[0].status);
  return std::move(done[0]);
}

absl::StatusOr<Completion> Client::Write(const Buffer& local,
                                         uint64_t local_offset,
                                         const RemoteRegion& remote,
                                         uint64_t remote_offset,
                                         uint64_t length) {
  return Transfer(Op::Kind::kWrite, local, local_offset, remote, remote_offset,
                  length);
}

absl::StatusOr<Completion> Client::Read(const Buffer& local,
                                        uint64_t local_offset,
                                        const RemoteRegion& remote,
                                        uint64_t remote_offset,
                                        uint64_t length) {
  return Transfer(Op::Kind::kRead, local, local_offset, remote, remote_offset,
                  length);
}

absl::StatusOr<std::vector<Completion>> Client::Batch(
    absl::Span<const Op> ops) {
  RDMAD_RETURN_IF_ERROR(PrepareToRun(ops));
  if (ops.empty()) return std::vector<Completion>();
  const absl::Duration budget = impl_->link->CallBudget();
  if (budget <= absl::ZeroDuration()) return DeadlinePassed();
  return impl_->transfers->Run(ops, budget);
}

absl::StatusOr<std::unique_ptr<Queue>> Client::OpenQueue(QueueOptions options) {
  if (options.spin < absl::ZeroDuration() || options.spin > kMaxQueueSpin) {
    return absl::InvalidArgumentError(absl::StrCat(
        "QueueOptions::spin is ", absl::FormatDuration(options.spin),
        ": give how long Wait may busy-poll, from 0 (never) to ",
        absl::FormatDuration(kMaxQueueSpin)));
  }
  // Sent in whole milliseconds, at least 1: a 0 (what Op::timeout uses for
  // "the default") would have made every op time out after 1 ms.
  if (options.default_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "QueueOptions::default_timeout is ",
        absl::FormatDuration(options.default_timeout),
        ": give how long an operation that sets no Op::timeout may take "
        "(more than 0, at most an hour; the default is 30s)"));
  }
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::OpenQueueRequest request;
  request.set_submission_entries(options.depth);
  request.set_completion_entries(options.completion_depth);
  request.set_default_timeout_ms(static_cast<uint32_t>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(options.default_timeout), 1,
                          int64_t{3600} * 1000)));
  request.set_notifications(options.notifications);
  v1::OpenQueueResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(call.stub->OpenQueue(&context, request, &response)));
  const uint64_t id = response.queue_id();
  // Closes the queue unless it belongs to a session before a restart (its
  // id may name another queue in the new one).
  auto abandon = [&] {
    (void)CloseQueueIn(*impl_->link, id, call.generation);
  };
  // The segment and the two eventfds come on the session socket.
  UniqueFd fds[3];
  uint64_t size = 0;
  for (uint64_t which = 0; which < 3; ++which) {
    session_wire::Message ask;
    ask.type = session_wire::MessageType::kGetQueueFd;
    ask.a = id;
    ask.b = which;
    auto reply = impl_->link->Ask(ask, -1, call.generation);
    if (!reply.ok() || reply->type != session_wire::MessageType::kFd ||
        !reply->fd.valid() || reply->a != id) {
      abandon();
      return reply.ok() ? absl::InternalError(
                              "rdmad answered without the queue's descriptor")
                        : reply.status();
    }
    if (which == 0) size = reply->b;
    fds[which] = std::move(reply->fd);
  }
  if (size != response.segment_size() || size < queue::kHeaderSize) {
    abandon();
    return absl::InternalError("rdmad gave a queue segment of the wrong size");
  }
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED,
                      fds[0].get(), 0);
  if (base == MAP_FAILED) {
    const absl::Status status =
        absl::ErrnoToStatus(errno, "mmap of the queue's shared memory");
    abandon();
    return status;
  }
  if (absl::Status s = queue::CheckSegment(base, size); !s.ok()) {
    ::munmap(base, size);
    abandon();
    return s;
  }
  auto impl = std::make_unique<Queue::Impl>(
      this, impl_->link, id, call.generation, base, size, std::move(fds[1]),
      std::move(fds[2]), options.spin,
      std::min(options.default_timeout, absl::Hours(1)));
  impl->notifications = options.notifications;
  impl->spin_when_preempted = options.spin_when_preempted;
  return std::unique_ptr<Queue>(new Queue(std::move(impl)));
}

absl::Status client_internal::CloseQueueIn(SessionLink& link, uint64_t id,
                                           uint64_t generation) {
  grpc::ClientContext context;
  auto call = link.PrepareIn(context, generation);
  if (absl::IsFailedPrecondition(call.status())) return absl::OkStatus();
  if (!call.ok()) return call.status();
  v1::CloseQueueRequest request;
  request.set_queue_id(id);
  v1::CloseQueueResponse response;
  return FromGrpc(call->stub->CloseQueue(&context, request, &response));
}

absl::StatusOr<RemoteHandle> Client::OpenRemote(const RemoteRegion& remote) {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::OpenRemoteRequest request;
  *request.mutable_remote() = ToProto(remote);
  v1::OpenRemoteResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(call.stub->OpenRemote(&context, request, &response)));
  RemoteHandle handle;
  handle.id_ = response.handle();
  handle.size_ = response.size();
  handle.access_ = FromProto(response.access());
  // UNSPECIFIED: the region is this daemon's own.
  handle.transport_ = response.transport() == v1::TRANSPORT_UNSPECIFIED
                          ? Transport::kLocal
                          : FromProto(response.transport());
  handle.peer_ = response.peer();
  handle.name_ = response.name();
  handle.session_generation_ = call.generation;
  return handle;
}

absl::Status Client::CloseRemote(const RemoteHandle& handle) {
  // A handle of a session before a daemon restart is gone with it, and its
  // id may name another handle now.
  grpc::ClientContext context;
  auto call = impl_->link->PrepareIn(context, handle.session_generation_);
  if (absl::IsFailedPrecondition(call.status())) return absl::OkStatus();
  if (!call.ok()) return call.status();
  v1::CloseRemoteRequest request;
  request.set_handle(handle.id_);
  v1::CloseRemoteResponse response;
  return FromGrpc(call->stub->CloseRemote(&context, request, &response));
}

}  // namespace rdmad
