// The one place a submission entry from a client's ring is validated and
// decoded (the ring's counterpart of service/transfer_decoder.h): every
// field is checked on the daemon's own copy of the entry, and the result is
// the same core::TransferSpec the gRPC path produces, which the
// TransferEngine then checks against the session's rights exactly as it
// checks a gRPC request; or, for a target on this daemon, the
// core::LocalCopyRequest the engine checks the same way and copies at once
// (TransferEngine::CopyNow).
#ifndef RDMAD_DAEMON_RING_RING_DECODER_H_
#define RDMAD_DAEMON_RING_RING_DECODER_H_

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/base/optimization.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/queue_layout.h"
#include "daemon/core/transfer.h"
#include "daemon/ring/remote_handles.h"

namespace rdmad::ring {

// Longest per-op timeout a submission may ask for.
inline constexpr uint32_t kMaxTimeoutMs = 3600 * 1000;

// A submission entry's fields, validated (DecodeEntry).
struct DecodedEntry {
  core::OpType op = core::OpType::kWrite;
  std::optional<uint32_t> immediate;  // WRITE only
  uint64_t local_region = 0;          // not 0
  uint64_t local_offset = 0;
  uint64_t remote_offset = 0;
  uint64_t length = 0;  // > 0
  uint32_t timeout_ms = 0;  // 0: the queue's default; <= kMaxTimeoutMs
};

// What is wrong with an entry that failed DecodeEntry's checks (its slow
// half, out of line).
absl::Status DescribeBadEntry(const queue::SubmissionEntry& entry,
                              const RemoteHandle* handle);

// Validates `entry`, whose handle the caller looked up (null: the session
// has none with entry.remote_handle), into `*out`. Errors as for
// DecodeSubmission. Inline: the engine runs it for every entry.
inline absl::Status DecodeEntry(const queue::SubmissionEntry& e,
                                const RemoteHandle* handle,
                                DecodedEntry* out) {
  const bool write = e.op == static_cast<uint8_t>(queue::OpCode::kWrite);
  const bool read = e.op == static_cast<uint8_t>(queue::OpCode::kRead);
  const bool immediate = (e.flags & queue::kFlagImmediate) != 0;
  if (ABSL_PREDICT_FALSE(!(write || read) ||
                         (e.flags & ~queue::kKnownFlags) != 0 ||
                         e.reserved0 != 0 || (immediate && !write) ||
                         e.length == 0 || e.local_region == 0 ||
                         handle == nullptr || handle->id != e.remote_handle)) {
    return DescribeBadEntry(e, handle);
  }
  DecodedEntry& d = *out;
  d.op = write ? core::OpType::kWrite : core::OpType::kRead;
  if (immediate) d.immediate = e.immediate;
  d.local_region = e.local_region;
  d.local_offset = e.local_offset;
  d.remote_offset = e.remote_offset;
  d.length = e.length;
  d.timeout_ms = std::min(e.timeout_ms, kMaxTimeoutMs);
  return absl::OkStatus();
}
// What a decoded entry naming `handle` asks: the spec (into `*out`, a
// default-constructed one), or, for a handle of a region of this daemon
// (handle.target.is_local()), the copy (`handle` must outlive it).
void ToSpec(const DecodedEntry& entry, const RemoteHandle& handle,
            absl::Time now, absl::Duration default_timeout,
            core::TransferSpec* out);
inline core::LocalCopyRequest ToLocalCopy(const DecodedEntry& d,
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

// INVALID_ARGUMENT for an unknown op, unknown flags, non-zero reserved
// fields, an immediate on a READ, a zero length, no local region;
// NOT_FOUND for a remote handle the session does not have. The remote range
// and access are checked further down against what the region's daemon
// says now (the handle's size and access are what it said when opened).
absl::StatusOr<core::TransferSpec> DecodeSubmission(
    const queue::SubmissionEntry& entry, const RemoteHandles& handles,
    absl::Time now, absl::Duration default_timeout);
// The same with the entry's handle already looked up (null: the session
// has none with entry.remote_handle), as the engine does once for a run of
// entries that name the same handle.
absl::StatusOr<core::TransferSpec> DecodeSubmission(
    const queue::SubmissionEntry& entry, const RemoteHandle* handle,
    absl::Time now, absl::Duration default_timeout);
// The same, decoding into `*out` (a default-constructed spec): the engine
// decodes straight into its batch.
absl::Status DecodeSubmission(const queue::SubmissionEntry& entry,
                              const RemoteHandle* handle, absl::Time now,
                              absl::Duration default_timeout,
                              core::TransferSpec* out);

}  // namespace rdmad::ring

#endif  // RDMAD_DAEMON_RING_RING_DECODER_H_
