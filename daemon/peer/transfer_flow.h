// TransferFlow: runs checked transfers (core::Transfer) to other daemons.
//
// For each transfer:
//   1. find the peer (PeerTable), take a ready link from its connection
//      (Hello and Connect first if needed);
//   2. find the target: a descriptor (whose incarnation must be the peer's
//      current one: a different one first makes the connection say Hello
//      again, since the peer may have restarted since we last asked; then,
//      if it still differs, the region is gone: NOT_FOUND), or a name
//      through the peer's NameCache;
//   3. for a transfer the cluster directory routed, check that the peer is
//      one this daemon trusts to hold the name (core/holder_trust.h);
//      check the remote range against the region's length (OUT_OF_RANGE)
//      and the export's access (PERMISSION_DENIED) before anything is sent;
//      take the transport's key (DataChannel::KeyFor);
//   4. post on the channel; on failure retry once where retry_policy.h
//      says it can help.
// A batch goes through the same steps, but every transfer whose peer is
// ready and whose target is known goes to its channel in one Post per
// channel (a chain per QP on verbs, coalesced frames on TCP); the others
// take the long way one by one.
//
// Thread-safe; never blocks.
#ifndef RDMAD_DAEMON_PEER_TRANSFER_FLOW_H_
#define RDMAD_DAEMON_PEER_TRANSFER_FLOW_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "daemon/core/transfer.h"
#include "daemon/peer/remote_peer.h"
#include "daemon/runtime/timers.h"
#include "daemon/transport/transport.h"

namespace rdmad::peer {

class TransferFlow {
 public:
  // The peer at `address` for a transfer of `uid` (created on first use;
  // RESOURCE_EXHAUSTED when the table is full).
  using FindPeer = absl::AnyInvocable<absl::StatusOr<std::shared_ptr<RemotePeer>>(
      const std::string& address, uint32_t uid)>;

  // `timers` is not owned and outlives the flow (it tells the time).
  TransferFlow(FindPeer find, runtime::Timers* timers);

  // Takes every transfer (moved from); each one's `done` runs exactly once.
  void SubmitBatch(absl::Span<core::Transfer> transfers);

  // A remote region as its daemon describes it now, and the transport that
  // reaches it (steps 1 and 2 above, for Local.OpenRemote). `target` names
  // a peer (by name or descriptor); a descriptor of another run is
  // NOT_FOUND after the peer has been asked.
  struct Resolved {
    ResolvedRegion region;
    core::TransportKind transport = core::TransportKind::kNone;
  };
  void Resolve(const core::TransferTarget& target, uint32_t uid,
               absl::Time deadline, Callback<Resolved> done);

  // From now on new transfers fail UNAVAILABLE and nothing is retried.
  void Drain() { draining_.store(true); }

 private:
  struct Running {
    core::Transfer t;
    std::shared_ptr<RemotePeer> peer;
    int retries_left = 1;
    bool from_cache = false;
    core::TransportKind kind = core::TransportKind::kNone;
    // Set for Resolve: the flow stops before sending and answers this.
    std::shared_ptr<Callback<Resolved>> resolve_only;
    const std::string& address() const {
      return t.remote.descriptor != nullptr ? t.remote.descriptor->peer
                                            : t.remote.peer;
    }
  };
  using RunningPtr = std::unique_ptr<Running>;

  // Finds the peer and counts the transfer in its traffic.
  absl::Status Attach(Running& r);
  void Begin(RunningPtr r);
  void OnLink(RunningPtr r, absl::StatusOr<Link> link);
  // A transfer routed by the cluster directory (TransferTarget::
  // holder_trust) goes only to a peer trusted to hold its name, as that
  // peer answered Hello for the link's run: PERMISSION_DENIED otherwise.
  static absl::Status CheckHolder(const Running& r, const Link& link);
  // Checks the target and builds the op that carries `r`. Finishes `r` (or
  // retries it) and returns nullopt when a check fails.
  std::optional<transport::RemoteOp> MakeOp(RunningPtr r, const Link& link,
                                            const ResolvedRegion& target);
  void Send(RunningPtr r, const Link& link, const ResolvedRegion& target);
  void OnSent(RunningPtr r, absl::Status status);
  // A step failed: retries once where that can help, else finishes.
  void Fail(RunningPtr r, absl::Status status);
  void Finish(RunningPtr r, absl::Status status);

  FindPeer find_;
  runtime::Timers* const timers_;  // Not owned.
  std::atomic<bool> draining_{false};
};

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_TRANSFER_FLOW_H_
