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
  DecodedEntry decoded;
  if (absl::Status s = DecodeEntry(e, handle, &decoded); !s.ok()) return s;
  ToSpec(decoded, *handle, now, default_timeout, out);
  return absl::OkStatus();
}

absl::Status DescribeBadEntry(const queue::SubmissionEntry& e,
                              const RemoteHandle* handle) {
  const bool write = e.op == static_cast<uint8_t>(queue::OpCode::kWrite);
  switch (static_cast<queue::OpCode>(e.op)) {
    case queue::OpCode::kWrite:
    case queue::OpCode::kRead:
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
  if ((e.flags & queue::kFlagImmediate) != 0 && !write) {
    return absl::InvalidArgumentError("only a WRITE can carry an immediate");
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
  // DecodeEntry sent it here for failing a check this one repeats.
  return absl::InternalError("submission entry failed an unknown check");
}

void ToSpec(const DecodedEntry& d, const RemoteHandle& handle, absl::Time now,
            absl::Duration default_timeout, core::TransferSpec* out) {
  core::TransferSpec& spec = *out;
  spec.op = d.op;
  spec.immediate = d.immediate;
  spec.local = core::RegionKey{d.local_region, ""};
  spec.local_offset = d.local_offset;
  spec.length = d.length;
  spec.remote = handle.target;
  spec.remote.offset = d.remote_offset;
  spec.deadline = now + (d.timeout_ms == 0 ? default_timeout
                                           : absl::Milliseconds(d.timeout_ms));
}

}  // namespace rdmad::ring
