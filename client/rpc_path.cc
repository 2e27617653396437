#include "client/rpc_path.h"

#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "client/buffer_impl.h"
#include "client/client_impl.h"
#include "client/convert.h"
#include "client/session_link.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::client_internal {

absl::StatusOr<std::vector<Completion>> RpcPath::Run(Client& client,
                                                     absl::Span<const Op> ops) {
  RDMAD_RETURN_IF_ERROR(client.PrepareToRun(ops));
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!std::holds_alternative<const RemoteRegion*>(ops[i].remote) ||
        ops[i].immediate.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "operation ", i, " (tag ", ops[i].tag, ") of ", ops.size(),
          ": the gRPC transfer calls take a RemoteRegion and no immediate"));
    }
  }
  std::vector<Completion> results(ops.size());
  if (ops.empty()) return results;
  auto fill = [](const Op& op, v1::TransferOp* out) {
    const RemoteRegion& remote = *std::get<const RemoteRegion*>(op.remote);
    out->set_op(op.kind == Op::Kind::kWrite ? v1::OP_WRITE : v1::OP_READ);
    out->mutable_local()->set_id(op.local->id());
    out->set_local_offset(op.local_offset);
    *out->mutable_remote() = ToProto(remote);
    out->set_remote_offset(remote.offset + op.remote_offset);
    out->set_length(op.length);
  };
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call,
                         client.impl_->link->Prepare(context));
  for (const Op& op : ops) {
    // The ids below are the session's that PrepareToRun checked them
    // against.
    if (op.local->impl_->generation != call.generation) {
      return absl::FailedPreconditionError(
          "rdmad restarted during this call: do it again");
    }
  }
  for (size_t i = 0; i < ops.size(); ++i) results[i].tag = ops[i].tag;
  if (ops.size() == 1) {
    v1::TransferRequest request;
    fill(ops[0], request.mutable_op());
    v1::TransferResponse response;
    const bool write = ops[0].kind == Op::Kind::kWrite;
    // The call's status is the op's.
    results[0].status =
        FromGrpc(write ? call.stub->Write(&context, request, &response)
                       : call.stub->Read(&context, request, &response));
    if (!results[0].status.ok()) return results;
    results[0].bytes = response.bytes();
    results[0].transport = FromProto(response.transport());
    results[0].daemon_time = absl::Nanoseconds(response.latency_ns());
    return results;
  }
  v1::BatchRequest request;
  for (const Op& op : ops) fill(op, request.add_ops());
  v1::BatchResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(call.stub->Batch(&context, request, &response)));
  if (static_cast<size_t>(response.results_size()) != ops.size()) {
    return absl::InternalError(
        absl::StrCat("rdmad answered a Batch of ", ops.size(),
                     " operations with ", response.results_size(), " results"));
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    const v1::OpStatus& result = response.results(static_cast<int>(i));
    if (result.code() == 0) {
      results[i].bytes = ops[i].length;  // a transfer moves all or fails
    } else {
      results[i].status = absl::Status(
          static_cast<absl::StatusCode>(result.code()), result.message());
    }
  }
  return results;
}

}  // namespace rdmad::client_internal
