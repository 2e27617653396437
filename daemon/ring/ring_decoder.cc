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

absl::Status DecodeEntry(const queue::SubmissionEntry& e,
                         const RemoteHandle* handle, DecodedEntry* out) {
  DecodedEntry& d = *out;
  switch (static_cast<queue::OpCode>(e.op)) {
    case queue::OpCode::kWrite:
      d.op = core::OpType::kWrite;
      break;
    case queue::OpCode::kRead:
      d.op = core::OpType::kRead;
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
    if (d.op != core::OpType::kWrite) {
      return absl::InvalidArgumentError(
          "only a WRITE can carry an immediate");
    }
    d.immediate = e.immediate;
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
  d.local_region = e.local_region;
  d.local_offset = e.local_offset;
  d.remote_offset = e.remote_offset;
  d.length = e.length;
  d.timeout_ms = std::min(e.timeout_ms, kMaxTimeoutMs);
  return absl::OkStatus();
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

core::LocalCopyRequest ToLocalCopy(const DecodedEntry& d,
                                   const RemoteHandle& handle) {
  core::LocalCopyRequest copy;
  copy.op = d.op;
  copy.local_id = d.local_region;
  copy.local_offset = d.local_offset;
  copy.target = &handle.target;
  copy.target_offset = d.remote_offset;
  copy.length = d.length;
  copy.immediate = d.immediate;
  return copy;
}

}  // namespace rdmad::ring
