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

#include <cstdint>
#include <optional>

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

// Validates `entry`, whose handle the caller looked up (null: the session
// has none with entry.remote_handle), into `*out`. Errors as for
// DecodeSubmission.
absl::Status DecodeEntry(const queue::SubmissionEntry& entry,
                         const RemoteHandle* handle, DecodedEntry* out);
// What a decoded entry naming `handle` asks: the spec (into `*out`, a
// default-constructed one), or, for a handle of a region of this daemon
// (handle.target.is_local()), the copy (`handle` must outlive it).
void ToSpec(const DecodedEntry& entry, const RemoteHandle& handle,
            absl::Time now, absl::Duration default_timeout,
            core::TransferSpec* out);
core::LocalCopyRequest ToLocalCopy(const DecodedEntry& entry,
                                   const RemoteHandle& handle);

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
