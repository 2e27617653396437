#include "daemon/service/transfer_decoder.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/region_address.h"
#include "daemon/peer/descriptor_codec.h"
#include "daemon/service/proto_convert.h"

namespace rdmad::service {

absl::StatusOr<core::TransferTarget> DecodeRemoteRegion(
    const v1::RemoteRegion& remote) {
  core::TransferTarget target;
  target.peer = remote.peer();
  if (!target.peer.empty()) {
    if (absl::Status s = ValidatePeerAddress(target.peer); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("remote peer: ", s.message()));
    }
  }
  switch (remote.ref_case()) {
    case v1::RemoteRegion::kName:
      if (absl::Status s = ValidateRegionName(remote.name()); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("remote region: ", s.message()));
      }
      target.name = remote.name();
      break;
    case v1::RemoteRegion::kEncodedDescriptor: {
      if (remote.encoded_descriptor().empty()) {
        return absl::InvalidArgumentError(
            "remote region: the encoded descriptor is empty");
      }
      auto decoded = peer::DecodeDescriptor(remote.encoded_descriptor());
      if (!decoded.ok()) return decoded.status();
      if (!target.peer.empty() && target.peer != decoded->peer()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the descriptor names a region on ", decoded->peer(),
            " but the transfer names peer ", target.peer,
            ": leave the peer empty or make them agree"));
      }
      auto info = std::make_shared<core::RemoteRegionInfo>(
          peer::RegionInfoFromProto(*decoded));
      target.peer = info->peer;
      target.descriptor = std::move(info);
      break;
    }
    case v1::RemoteRegion::REF_NOT_SET:
      return absl::InvalidArgumentError(
          "no remote region given: set RemoteRegion.name or "
          "RemoteRegion.encoded_descriptor");
  }
  return target;
}

absl::StatusOr<core::TransferSpec> DecodeTransfer(const v1::TransferOp& op,
                                                  core::OpType type,
                                                  absl::Time deadline) {
  core::TransferSpec spec;
  spec.op = type;
  spec.deadline = deadline;
  const v1::OpType expected =
      type == core::OpType::kWrite ? v1::OP_WRITE : v1::OP_READ;
  if (!v1::OpType_IsValid(op.op())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "op: unknown operation ", op.op(), ": use OP_WRITE or OP_READ"));
  }
  if (op.op() != v1::OP_UNSPECIFIED && op.op() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("op is ", v1::OpType_Name(op.op()), " in a ",
                     type == core::OpType::kWrite ? "Write" : "Read",
                     " call: leave it unset, or call ",
                     type == core::OpType::kWrite ? "Read" : "Write"));
  }
  auto local = FromProto(op.local());
  if (!local.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("local region: ", local.status().message()));
  }
  spec.local = *std::move(local);
  spec.local_offset = op.local_offset();
  spec.length = op.length();
  if (op.length() == 0) {
    return absl::InvalidArgumentError(
        "transfer length is 0: move at least one byte");
  }
  auto target = DecodeRemoteRegion(op.remote());
  if (!target.ok()) return target.status();
  spec.remote = *std::move(target);
  spec.remote.offset = op.remote_offset();
  return spec;
}

}  // namespace rdmad::service
