// VerbsChannel: the data path to one peer over a pool of connected RC QPs
// (transport::DataChannel for the verbs transport).
//
// A channel owns one CompletionQueue and the QPs of its pool (already in
// RTS, connected to QPs the peer created for us in Peer.Connect) and lives
// on one event loop of the daemon's IoRuntime: the loop watches the CQ's
// completion channel, and while work requests are in flight the channel
// also polls the CQ on every turn of the loop (a completion is often
// microseconds away), so it owns no thread and takes no lock around
// ibv_poll_cq. A posted batch of operations is split into work requests of
// at most chunk_bytes (and the port's max message size); they are spread
// over the QPs with the most free send-queue slots and posted as chains,
// one ibv_post_send per chain, with selective signaling: only the last WR
// of a chain (and at least every max_send_wr/2-th) asks for a completion,
// since an RC send queue completes in order and a completion retires every
// WR before it. Short WRITEs go inline. A WR's wr_id names its QP and its
// place on that QP, so a completion finds both without a search. The send
// queue is never overrun: a QP takes a WR only while it has a free slot;
// the rest wait in the channel's queue.
//
// Ordering and completion: an operation completes (its callback runs) when
// every one of its WRs has completed; chunks of one operation, and separate
// operations, may land in any order (they use several QPs). A WRITE that
// completed is in the remote region (the RC ACK means the responder placed
// it); a READ that completed is in the local buffer.
//
// WRITE with an immediate (verbs_notice.h, verbs_channel_notices.cc): all
// WRs of such an operation go on one QP, followed by a SEND of a notice
// naming the region, range and immediate; the operation completes when
// they completed and the peer's ack came back (its NoticeReceiver told the
// region's owner, or says why not: the op fails with that reason). At most
// kNoticeCredits notices per QP await their ack; more wait in the channel.
// Like a TCP reply, the ack is awaited until the operation's deadline.
//
// Growth (qp_growth.h): a channel given a `grow` function starts with the
// QPs it was given (one, for a verbs peer) and, when WRs keep waiting
// because every QP's send queue is full, asks for more: `grow` makes them
// on the channel's CQ (grown first, on the loop that polls it), has the
// peer add as many to the same handshake's pool, and hands them back at
// RTS; the channel then spreads new WRs over them too. WRs already posted
// stay on their QPs. A grow that fails changes nothing (the channel backs
// off and asks again later); it never fails an operation.
//
// Failures: a failed completion puts its QP in the error state. The WR that
// failed fails its operation with the status the NIC gave (a remote access
// error is PERMISSION_DENIED, retries exhausted UNAVAILABLE); WRs behind it
// are flushed and fail their operations with UNAVAILABLE. From then on the
// channel refuses new operations with UNAVAILABLE and NeedsReconnect() is
// true: the peer layer builds a new pool with a new Peer.Connect (a new
// generation), and retires this one. An operation whose deadline passes is
// failed with DEADLINE_EXCEEDED, but only after the QPs carrying its WRs
// were moved to the error state and their WRs flushed: the callback never
// runs while the NIC may still write into the operation's memory.
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_CHANNEL_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_CHANNEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/runtime/event_loop.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/completion_queue.h"
#include "daemon/transport/verbs/qp_growth.h"
#include "daemon/transport/verbs/queue_pair.h"

namespace rdmad::verbs {

inline constexpr uint64_t kDefaultReadChunkBytes = 64 << 10;

// QPs a grow added: connected (RTS), with the peer's QP number of each.
struct GrownQps {
  std::vector<std::unique_ptr<QueuePair>> qps;
  std::vector<uint32_t> remote_qpns;
};
using GrowDone = absl::AnyInvocable<void(absl::StatusOr<GrownQps>)>;
// Called on the channel's loop: grows `cq` for `total` QPs (the loop is the
// thread that polls it), creates `count` QPs on it, connects them to as
// many the peer adds, and calls `done` once with them, from any thread.
using GrowQps = std::function<void(uint32_t count, uint32_t total,
                                   std::shared_ptr<CompletionQueue> cq,
                                   GrowDone done)>;

struct VerbsChannelOptions {
  // The loop the channel lives on. Not owned; must outlive the channel's
  // last operation (the daemon stops its runtime last).
  runtime::EventLoop* loop = nullptr;
  std::string peer;           // the peer's Peer-service address, for messages
  std::string local_device;   // picks the local region's lkey
  std::string remote_device;  // picks the remote region's rkey
  uint64_t generation = 0;    // handshake that built the pool (ListQps)
  // Largest WR; capped by each QP's max message size.
  uint64_t chunk_bytes = 1ull << 20;
  // Largest READ WR (capped by chunk_bytes). A READ's response is one burst
  // of length/MTU packets from the peer, and a lost one is recovered only
  // by the requester's ACK timeout (~1 s at qp_timeout 18): in the two-VM
  // soft-RoCE lab 1 MiB READs moved 0.6-0.9 MB/s, 64 KiB ones 1.7-3.4 MB/s
  // (8 MiB get, tests/lab). 64 KiB still fills a hardware link's bandwidth
  // with the READs a pool keeps in flight (perftest's ib_read_bw default).
  uint64_t read_chunk_bytes = kDefaultReadChunkBytes;
  // Most WRs in one ibv_post_send chain.
  uint32_t max_chain = 16;
  // A QP in the error state whose flushed WRs have not all completed after
  // this long is taken as drained (the QP no longer moves data).
  absl::Duration flush_grace = absl::Seconds(1);
  // Adds QPs while the traffic asks for them (see Growth above); null: the
  // pool keeps the QPs it started with. growth.max_qps caps the pool.
  GrowQps grow;
  QpGrowthOptions growth;
};

class VerbsChannel final : public transport::DataChannel {
 public:
  // Takes connected QPs (RTS), all of whose completions go to `cq`.
  // `remote_qpns[i]` is the peer's QP number of qps[i], for ListQps.
  static absl::StatusOr<std::unique_ptr<VerbsChannel>> Create(
      VerbsChannelOptions options, std::shared_ptr<CompletionQueue> cq,
      std::vector<std::unique_ptr<QueuePair>> qps,
      std::vector<uint32_t> remote_qpns);
  ~VerbsChannel() override;  // Close()

  core::TransportKind kind() const override {
    return core::TransportKind::kVerbs;
  }
  // {address, rkey} on the peer's device this channel's QPs reach.
  absl::StatusOr<transport::RemoteKey> KeyFor(
      const core::RemoteRegionInfo& region) const override;
  void Post(absl::Span<transport::RemoteOp> ops) override;
  transport::ChannelInfo Describe() const override;
  bool NeedsReconnect() const override;
  void Close() override;

  // Moves QP `index` to the error state, as a failed completion would (for
  // fault-injection tests). No-op for an unknown index.
  void ForceError(size_t index);

 private:
  class Impl;
  explicit VerbsChannel(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_CHANNEL_H_
