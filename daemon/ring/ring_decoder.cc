#include "daemon/ring/ring_decoder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rdmad::ring {

absl::StatusOr<core::TransferSpec> DecodeSubmission(
    const queue::SubmissionEntry& e, const RemoteHandles& handles,
    absl::Time now, absl::Duration default_timeout) {
  const std::shared_ptr<const RemoteHandle> handle =
      handles.Find(e.remote_handle);
  return DecodeSubmission(e, handle.get(), now, default_timeout);
}

absl::StatusOr<core::TransferSpec> DecodeSubmission(
    const queue::SubmissionEntry& e, const RemoteHandle* handle,
    absl::Time now, absl::Duration default_timeout) {
  core::TransferSpec spec;
  absl::Status s = DecodeSubmission(e, handle, now, default_timeout, &spec);
  if (!s.ok()) return s;
  return spec;
}

absl::Status DecodeSubmission(const queue::SubmissionEntry& e,
                              const RemoteHandle* handle, absl::Time now,
                              absl::Duration default_timeout,
                              core::TransferSpec* out) {
  core::TransferSpec& spec = *out;
  switch (static_cast<queue::OpCode>(e.op)) {
    case queue::OpCode::kWrite:
      spec.op = core::OpType::kWrite;
      break;
    case queue::OpCode::kRead:
      spec.op = core::OpType::kRead;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "submission has op code ", e.op, ": use 1 (WRITE) or 2 (READ)"));
  }
  if ((e.flags & ~queue::kKnownFlags) != 0 || e.reserved0 != 0) {
    return absl::InvalidArgumentError(
        "submission has unknown flags or non-zero reserved fields: is the "
        "client library the daemon's version?");
  }
  if ((e.flags & queue::kFlagImmediate) != 0) {
    if (spec.op != core::OpType::kWrite) {
      return absl::InvalidArgumentError(
          "only a WRITE can carry an immediate");
    }
    spec.immediate = e.immediate;
  }
  if (e.length == 0) {
    return absl::InvalidArgumentError(
        "transfer length is 0: move at least one byte");
  }
  if (e.local_region == 0) {
    return absl::InvalidArgumentError("submission names no local region");
  }
  if (handle == nullptr || handle->id != e.remote_handle) {
    return absl::NotFoundError(absl::StrCat(
        "no remote handle ", e.remote_handle,
        " in this session: open the region with OpenRemote first"));
  }
  spec.local = core::RegionKey{e.local_region, ""};
  spec.local_offset = e.local_offset;
  spec.length = e.length;
  spec.remote = handle->target;
  spec.remote.offset = e.remote_offset;
  const uint32_t timeout_ms = std::min(e.timeout_ms, kMaxTimeoutMs);
  spec.deadline = now + (timeout_ms == 0 ? default_timeout
                                         : absl::Milliseconds(timeout_ms));
  return absl::OkStatus();
}

}  // namespace rdmad::ring
