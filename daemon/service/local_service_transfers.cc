// LocalService's data calls over gRPC: Write, Read and Batch. Each is
// decoded and checked here, then handed to the transfer engine; the reply is
// sent from whichever thread completes the transfer, never by a gRPC thread
// that waits.
#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/service/call_helpers.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/local_service.h"
#include "daemon/service/proto_convert.h"
#include "daemon/service/self_route.h"
#include "daemon/service/transfer_decoder.h"

namespace rdmad::service {

grpc::ServerUnaryReactor* LocalService::Transfer(
    grpc::CallbackServerContext* context, const v1::TransferRequest* request,
    v1::TransferResponse* response, core::OpType type) {
  auto caller = RequireSession(context);
  if (!caller.ok()) return Done(context, caller.status());
  auto spec = DecodeTransfer(request->op(), type, DeadlineOf(context));
  if (!spec.ok()) return Done(context, spec.status());
  RouteToSelf(*deps_.identity, &spec->remote);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Completes from whichever thread finishes the transfer; no gRPC thread
  // waits for it.
  deps_.transfers->Submit(
      *caller, *std::move(spec),
      [reactor, response](absl::StatusOr<core::TransferResult> result) {
        if (result.ok()) {
          response->set_bytes(result->bytes);
          response->set_transport(ToProto(result->transport));
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
  // The operations go down as one batch: the engine hands them to the peer
  // layer together, which posts those for one channel in one Post (a
  // chain per QP on verbs, coalesced frames on TCP).
  std::vector<core::TransferRequest> batch;
  batch.reserve(n);
  for (int i = 0; i < n; ++i) {
    const v1::TransferOp& op = request->ops(i);
    v1::OpStatus* slot = response->mutable_results(i);
    core::TransferDone complete = [reactor, response, pending, slot](
                                      absl::StatusOr<core::TransferResult>
                                          result) {
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
    auto spec = DecodeTransfer(
        op, op.op() == v1::OP_WRITE ? core::OpType::kWrite : core::OpType::kRead,
        deadline);
    if (!spec.ok()) {
      complete(spec.status());
      continue;
    }
    RouteToSelf(*deps_.identity, &spec->remote);
    batch.push_back({*std::move(spec), std::move(complete)});
  }
  deps_.transfers->SubmitBatch(*caller, absl::MakeSpan(batch));
  return reactor;
}

}  // namespace rdmad::service
