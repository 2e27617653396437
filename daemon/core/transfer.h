// The values a transfer is made of, from the gRPC edge down to a transport.
//
//   TransferSpec  what a client asked for, decoded once at the edge (the
//                 Local service, or a shared-memory ring): every field is
//                 well-formed (peer address parsed, name valid, descriptor
//                 decoded, length > 0), nothing checked against the tables;
//   Transfer      the same after the TransferEngine checked it against the
//                 region table (the caller may use the local region, the
//                 local range is inside it, the uid's quota has room): what
//                 the peer layer and the transports trust and never check
//                 again;
//   LocalCopyRequest  a request whose target is on this daemon, named the
//                 way a ring names it, for the engine to check and copy
//                 at once.
#ifndef RDMAD_DAEMON_CORE_TRANSFER_H_
#define RDMAD_DAEMON_CORE_TRANSFER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/core/holder_trust.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/core/region.h"
#include "daemon/core/region_table.h"
#include "daemon/core/transport_kind.h"

namespace rdmad::core {

enum class OpType : uint8_t { kWrite, kRead };

inline absl::string_view OpName(OpType op) {
  return op == OpType::kWrite ? "write" : "read";
}

// A region another daemon exports, as that daemon described it (in answer
// to Peer.Resolve, or in a descriptor passed out of band). Each transport
// takes the key it needs from it (DataChannel::KeyFor).
struct RemoteRegionInfo {
  std::string peer;          // HOST:PORT of the daemon that holds it
  uint64_t incarnation = 0;  // that daemon's run that issued the keys
  uint64_t region_id = 0;
  std::string name;          // may be empty (a descriptor of a buffer)
  uint64_t length = 0;
  RemoteAccess access = RemoteAccess::kNone;
  // verbs: the remote virtual address of the first byte, and the rkey of
  // the export registration on each of the peer's devices.
  uint64_t addr = 0;
  std::vector<DeviceRegistration> rkeys;
  // tcp: the key of the current export.
  uint64_t tcp_key = 0;
};

// "region 'kv'" or "region #7", for messages.
std::string RemoteRegionLabel(const RemoteRegionInfo& region);

// The far side of a transfer, decoded.
struct TransferTarget {
  // HOST:PORT of the daemon that holds it (validated); empty: this daemon.
  std::string peer;
  // The region by exported name (validated), or by a decoded descriptor
  // (then `peer` equals descriptor->peer).
  std::string name;
  std::shared_ptr<const RemoteRegionInfo> descriptor;
  uint64_t offset = 0;
  // Cluster directory fences (directory_route.h): when non-zero, the peer
  // must hold exactly this region (its incarnation and region id) under
  // `name`, else the transfer fails NOT_FOUND.
  uint64_t expect_incarnation = 0;
  uint64_t expect_region_id = 0;
  // Cluster directory trust: when set, the peer must be one `holder_trust`
  // trusts to hold `name` under the certificate identity its record named
  // (`expect_identity`), as it answered Hello; else the transfer fails
  // PERMISSION_DENIED before anything is sent. Not owned; outlives the
  // transfer.
  const HolderTrust* holder_trust = nullptr;
  std::string expect_identity;
  // A region of this daemon by id, and the TCP key of the export it was
  // reached through: a descriptor this daemon issued, routed here instead
  // of looping back through the peer layer (service/self_route.h). Then
  // `peer`, `name` and `descriptor` are empty.
  uint64_t self_region_id = 0;
  uint64_t self_key = 0;

  bool is_local() const { return peer.empty() && descriptor == nullptr; }
};

// What a client asked for, decoded (see the file comment).
struct TransferSpec {
  OpType op = OpType::kWrite;
  RegionKey local;
  uint64_t local_offset = 0;
  TransferTarget remote;
  uint64_t length = 0;  // > 0
  absl::Time deadline = absl::InfiniteFuture();
  // WRITE only: delivered with the data to the session that owns the
  // target region, as a notification.
  std::optional<uint32_t> immediate;
};

// A transfer whose target is a region of this daemon, as a caller that runs
// many small ones names it (a ring engine, for TransferEngine::CopyNow):
// the local region by id, the target as the caller resolved it once and
// keeps.
struct LocalCopyRequest {
  OpType op = OpType::kWrite;
  uint64_t local_id = 0;
  uint64_t local_offset = 0;
  // is_local(); not owned, outlives the call. Its `offset` is not read:
  // target_offset is.
  const TransferTarget* target = nullptr;
  uint64_t target_offset = 0;
  uint64_t length = 0;
  std::optional<uint32_t> immediate;  // see TransferSpec
};

struct TransferResult {
  uint64_t bytes = 0;
  TransportKind transport = TransportKind::kNone;
  absl::Duration latency;  // from the engine's start to completion
};

// Runs exactly once per transfer, from any thread.
using TransferDone = absl::AnyInvocable<void(absl::StatusOr<TransferResult>)>;

// A transfer checked against the tables (see the file comment). Move-only.
struct Transfer {
  OpType op = OpType::kWrite;
  // The local region, kept mapped (and registered) until `done` has run.
  std::shared_ptr<Region> local;
  uint64_t local_offset = 0;  // [local_offset, +length) inside `local`
  uint64_t length = 0;
  TransferTarget remote;
  absl::Time deadline = absl::InfiniteFuture();
  std::optional<uint32_t> immediate;  // see TransferSpec
  uint32_t uid = 0;  // the caller, as the kernel told the daemon
  absl::Time start;
  TransferDone done;

  char* local_data() const { return local->data() + local_offset; }
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_TRANSFER_H_
