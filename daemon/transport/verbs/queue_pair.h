// Reliable-connected queue pairs for one-sided RDMA WRITE and READ.
//
// A QueuePair is one RC QP on a CompletionQueue. Two daemons connect a pair
// of them by exchanging QpEndpoint values (over gRPC, see rdmad.v1.QpEndpoint)
// and moving each QP RESET -> INIT -> RTR -> RTS with Connect(). After that,
// PostWrite/PostRead/Post move bytes between a local registered buffer and a
// remote region named by (address, rkey); completions arrive on the CQ.
// These are the pieces the transport's QP pool is built from.
//
// Example (both QPs in one process, as the lab tests do):
//   QpConfig config;
//   config.port = port;
//   config.gid_index = gid_index;      // from ChooseGidIndex
//   RDMAD_ASSIGN_OR_RETURN(auto a, QueuePair::Create(cq, config));
//   RDMAD_ASSIGN_OR_RETURN(auto b, QueuePair::Create(cq, config));
//   RDMAD_ASSIGN_OR_RETURN(QpEndpoint ea, a->LocalEndpoint());
//   RDMAD_ASSIGN_OR_RETURN(QpEndpoint eb, b->LocalEndpoint());
//   RDMAD_RETURN_IF_ERROR(a->Connect(eb));
//   RDMAD_RETURN_IF_ERROR(b->Connect(ea));
//   RDMAD_RETURN_IF_ERROR(a->PostWrite({.wr_id = 1, .local_addr = src,
//       .length = n, .lkey = src_mr->lkey(), .remote_addr = dst,
//       .rkey = dst_mr->rkey()}));
//   RDMAD_RETURN_IF_ERROR(cq->WaitOne(absl::Now() + absl::Seconds(5)));
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_QUEUE_PAIR_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_QUEUE_PAIR_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "daemon/transport/verbs/completion_queue.h"
#include "daemon/transport/verbs/conversions.h"
#include "daemon/transport/verbs/handles.h"

namespace rdmad::verbs {

// Connection parameters of one RC QP: what a daemon sends its peer so the
// peer can point its QP at this one. Mirrors rdmad.v1.QpEndpoint; the
// service layer converts between the two.
struct QpEndpoint {
  uint32_t qpn = 0;            // QP number (24 bits)
  uint32_t psn = 0;            // first packet sequence number (24 bits)
  Gid gid{};                   // GID at gid_index, network byte order
  uint32_t gid_index = 0;      // for logs; the peer uses only `gid`
  uint32_t lid = 0;            // port LID (InfiniBand; 0 on RoCE)
  uint32_t mtu = 0;            // active MTU of the port, bytes
  uint32_t max_rd_atomic = 0;  // RDMA READs this QP accepts in flight
};

// Settings of an RC QP. Every field is set on purpose; the defaults suit a
// data-centre RoCEv2 or InfiniBand fabric and the soft-RoCE lab.
struct QpConfig {
  // Local port (1-based) and the index of the local GID the QP sends from
  // (the source GID of the GRH). Choose them with ChooseActivePort and
  // ChooseGidIndex; both daemons must use GIDs of the same type and family.
  uint32_t port = 1;
  uint32_t gid_index = 0;

  // Send queue: how many work requests may be outstanding (posted and not
  // yet completed; an unsignaled WR holds its slot until a later signaled WR
  // of the same QP completes), gather entries per WR, and the largest WRITE
  // that can be posted inline (copied into the WQE, so the buffer is free
  // when the post returns and the lkey is not needed).
  uint32_t max_send_wr = 128;
  uint32_t max_send_sge = 1;
  uint32_t max_inline_data = 64;
  // Receive queue: the data path is one-sided, but a WRITE with an
  // immediate is announced with a SEND (a notice, verbs_notice.h) that the
  // peer answers with a SEND (its ack), and each side keeps kNoticeCredits
  // (16) receives posted per QP for them.
  uint32_t max_recv_wr = 16;
  uint32_t max_recv_sge = 1;
  // When set, the QP takes its receives from this shared receive queue
  // (notice_srq.h) and has no receive queue of its own (max_recv_wr and
  // max_recv_sge are ignored; PostRecv fails). Not owned: it must outlive
  // the QP.
  ibv_srq* srq = nullptr;

  // Local ACK timeout, encoded as 4.096 us * 2^timeout: 18 is ~1.07 s.
  // Not perftest's 14 (~67 ms): with retry_cnt 6 that gave up after half a
  // second, and in the lab a 64 MiB READ between two emulated hosts on a
  // busy machine failed with RETRY_EXC_ERR while both peers were alive.
  // A dead peer is still noticed in ~7 s, and a transfer never waits past
  // its own deadline (the channel moves the QPs to the error state then).
  uint8_t timeout = 18;
  // Retransmissions after a timeout before the WR fails with
  // IBV_WC_RETRY_EXC_ERR: enough that a transient loss does not fail a
  // transfer. Not 7: soft-RoCE (rdma_rxe) takes 7 as "retry forever", and
  // then a dead peer is never detected (seen in the lab: a WRITE to a
  // SIGKILLed daemon hung until its deadline).
  uint8_t retry_cnt = 6;
  // Retries after a receiver-not-ready NAK before the SEND fails with
  // IBV_WC_RNR_RETRY_EXC_ERR; 7 would mean "forever". Only notices and
  // their acks are SENDs, and a sender keeps to its credits, so an rdmad
  // peer answers RNR only while its shared receive queue of notices is
  // empty (notice_srq.h: its loops are 1,024 notices behind) or when it
  // posts no receives at all (an rdmad without notices over verbs); then
  // the WRITE with an immediate fails after rnr_retry waits of the delay
  // that peer asks for (min_rnr_timer: 30-40 ms in all from an rdmad with
  // a shared queue, a few ms from one without) instead of hanging.
  uint8_t rnr_retry = 3;
  // The RNR NAK delay this QP asks senders to wait, encoded (20 = 10.24 ms);
  // required for RTR. Long, because on a serving QP an RNR means only that
  // the device's shared queue of notice receives ran empty (its loops are
  // 1,024 notices behind, e.g. descheduled on a busy host): with rnr_retry
  // 3 a notice waits some 30-40 ms for them before its WRITE fails, where
  // 0.64 ms (12) gave up after 2. No cost otherwise: senders wait only
  // after an RNR NAK.
  uint8_t min_rnr_timer = 20;
  // GRH hop limit (the IP TTL of RoCEv2 packets): above 1 so RoCEv2 can
  // cross routers. Traffic class is DSCP << 2 | ECN for RoCEv2.
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint8_t service_level = 0;

  // Caps on RDMA READs in flight. As initiator the QP uses
  // min(max_rd_atomic, this device's max_qp_init_rd_atom, the peer's
  // advertised max_rd_atomic); as responder it accepts and advertises
  // min(max_dest_rd_atomic, this device's max_qp_rd_atom). So both sides
  // agree and neither device is asked for more than it has.
  uint32_t max_rd_atomic = 16;
  uint32_t max_dest_rd_atomic = 16;

  // Cap on the path MTU in bytes, or 0 for none. The path MTU is the
  // smaller of the two ports' active MTUs (and this cap): a packet larger
  // than either side's MTU would be dropped.
  uint32_t path_mtu = 0;
};

// What the local port and device allow; an input to ResolvePath.
struct LocalLimits {
  uint32_t active_mtu = 0;           // bytes
  bool ethernet = false;             // RoCE port: every packet has a GRH
  bool grh_required = false;         // port flag IBV_QPF_GRH_REQUIRED
  uint32_t max_qp_rd_atom = 0;       // device: responder resources per QP
  uint32_t max_qp_init_rd_atom = 0;  // device: initiator depth per QP
};

// The negotiated attributes that go into the RTR and RTS transitions.
struct PathParams {
  ibv_mtu path_mtu = IBV_MTU_1024;
  uint8_t max_rd_atomic = 1;       // RTS: our READs in flight
  uint8_t max_dest_rd_atomic = 1;  // RTR: peer READs we accept
  bool use_grh = false;            // address the peer by GID (RoCE, routed IB)
};

// Responder resources this QP accepts and advertises as
// QpEndpoint.max_rd_atomic: min(config cap, device max_qp_rd_atom), at least
// 1, at most 255.
uint8_t ResponderResources(const QpConfig& config, const LocalLimits& local);

// Computes the RTR/RTS attributes for connecting to `remote`. Pure, so the
// negotiation is unit-tested. InvalidArgument (saying which field) if the
// remote endpoint cannot be right: QPN 0 or over 24 bits, PSN over 24 bits,
// an MTU that is not 256..4096, a zero GID where a GRH is needed, or LID 0
// on InfiniBand without GRH. A remote max_rd_atomic of 0 (a peer that did not
// say) is taken as 1, which every RC device supports.
absl::StatusOr<PathParams> ResolvePath(const QpConfig& config,
                                       const LocalLimits& local,
                                       const QpEndpoint& remote);

// One operation for PostWrite/PostRead/Post: a one-sided WRITE or READ, or
// a SEND (two-sided: it consumes a receive the peer posted).
struct RdmaOp {
  enum class Opcode { kWrite, kRead, kSend };

  Opcode opcode = Opcode::kWrite;
  // Returned in the completion's wr_id.
  uint64_t wr_id = 0;
  // Local buffer: WRITE reads it, READ fills it. Must lie inside the MR of
  // `lkey` (unless inline), and stay untouched until the completion.
  void* local_addr = nullptr;
  uint32_t length = 0;
  uint32_t lkey = 0;
  // Remote buffer: an address inside a peer's region and its rkey (WRITE
  // and READ; a SEND lands in the peer's next posted receive).
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  // IBV_SEND_SIGNALED: produce a completion. Leave it off for all but the
  // last WR of a batch (selective signaling), but signal at least once per
  // max_send_wr WRs or the send queue fills up. Failed WRs complete anyway.
  bool signaled = true;
  // IBV_SEND_INLINE: WRITE and SEND only, length <=
  // QueuePair::max_inline_data().
  bool inline_data = false;
};

// Fills wrs[i] and sges[i] from ops[i] and links wrs[0..n) into one chain
// for ibv_post_send (wrs[0] is its head, the last WR's next is null). A
// zero-length op gets no gather entry. Pure (no verbs call, no allocation):
// the caller owns the storage, which needs ops.size() entries each, and
// must have checked the ops (QueuePair::Post does).
void BuildSendChain(absl::Span<const RdmaOp> ops, absl::Span<ibv_send_wr> wrs,
                    absl::Span<ibv_sge> sges);

// One RC QP. Keeps its CompletionQueue (and through it the Device) alive.
//
// Thread-safety: PostWrite/PostRead/Post may be called from several threads
// at once (libibverbs serializes posts on a QP). The state changes
// (ModifyTo*, Connect, Reset) and LocalEndpoint must not run concurrently
// with each other or with posts; the QP pool serializes them.
class QueuePair {
 public:
  // Creates an RC QP in RESET whose send and receive completions go to
  // `cq`, with a fresh random PSN. Every WR is signaled only on request
  // (sq_sig_all = 0). InvalidArgument if config.port is not a port of the
  // device or config.gid_index is outside its GID table.
  static absl::StatusOr<std::unique_ptr<QueuePair>> Create(
      std::shared_ptr<CompletionQueue> cq, const QpConfig& config);

  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  uint32_t qpn() const { return qp_->qp_num; }
  const QpConfig& config() const { return config_; }
  const std::shared_ptr<CompletionQueue>& cq() const { return cq_; }
  // The QP. Not owned by the caller; valid while this object lives.
  ibv_qp* qp() const { return qp_.get(); }
  // Capacities the device granted (at least what the config asked for).
  uint32_t max_send_wr() const { return granted_.max_send_wr; }
  uint32_t max_recv_wr() const { return granted_.max_recv_wr; }
  uint32_t max_inline_data() const { return granted_.max_inline_data; }
  // Largest message the port accepts (longer transfers must be split).
  uint32_t max_message_size() const { return max_message_size_; }

  // This QP's connection parameters for the peer: QPN, PSN, the GID at
  // config().gid_index, LID, the port's active MTU and the READs it accepts.
  // Queries the port, so it reflects a changed MTU or address.
  absl::StatusOr<QpEndpoint> LocalEndpoint() const;

  // The current state (ibv_query_qp); the NIC moves a QP to ERR by itself
  // when a work request fails.
  absl::StatusOr<ibv_qp_state> QueryState() const;

  // RESET -> INIT: binds the port and allows remote READ and WRITE (each
  // MR still decides what it permits).
  absl::Status ModifyToInit();
  // INIT -> RTR: points the QP at `remote` with the negotiated path MTU,
  // responder resources and address (ResolvePath).
  absl::Status ModifyToRtr(const QpEndpoint& remote);
  // RTR -> RTS: sets our PSN, timeout and retries and the READ depth
  // negotiated in ModifyToRtr. FailedPrecondition before ModifyToRtr.
  absl::Status ModifyToRts();
  // All three in order; from RESET or INIT. The peer must have moved its QP
  // to RTR before this QP's first WR reaches it, or that WR is retried (and
  // fails after retry_cnt timeouts).
  absl::Status Connect(const QpEndpoint& remote);

  // Any state -> RESET, with a new PSN so that late packets of the old
  // connection cannot be taken for new ones. The QP can then be connected
  // again (to the same or a new peer): this is how a QP in ERR is reused.
  // Outstanding WRs are discarded without completions.
  absl::Status Reset();
  // Any state -> ERR: outstanding WRs complete with IBV_WC_WR_FLUSH_ERR.
  absl::Status ModifyToError();

  // Posts one RDMA WRITE of op.length bytes from op.local_addr to
  // (op.remote_addr, op.rkey). op.opcode is ignored.
  absl::Status PostWrite(RdmaOp op);
  // Posts one RDMA READ of op.length bytes from (op.remote_addr, op.rkey)
  // into op.local_addr. op.opcode is ignored.
  absl::Status PostRead(RdmaOp op);
  // Chains of up to this many WRs are built on the stack: a post of one
  // makes no heap allocation. Longer chains are allowed but allocate.
  static constexpr size_t kMaxChainOnStack = 64;

  // Posts `ops` as one chain with a single ibv_post_send. Checks every op
  // first (InvalidArgument naming it: inline READ, inline over
  // max_inline_data, length over max_message_size). If the NIC refuses one,
  // the ones before it were posted and will complete; the error says which,
  // and `posted` (if not null) receives how many were posted.
  absl::Status Post(absl::Span<const RdmaOp> ops, size_t* posted = nullptr);

  // Posts one receive of up to `length` bytes into `addr` (inside the MR of
  // `lkey`); its completion carries `wr_id`. Allowed from INIT on. The
  // buffer must stay untouched until the receive completes or the QP is
  // destroyed.
  absl::Status PostRecv(uint64_t wr_id, void* addr, uint32_t length,
                        uint32_t lkey);

 private:
  QueuePair(std::shared_ptr<CompletionQueue> cq, QpHandle qp,
            const QpConfig& config, const ibv_qp_cap& granted,
            uint32_t max_message_size);

  LocalLimits LimitsFrom(const ibv_port_attr& port) const;
  absl::Status Modify(ibv_qp_attr& attr, int mask, absl::string_view step);

  // Parent first: the QP is destroyed before the CQ reference is dropped.
  std::shared_ptr<CompletionQueue> cq_;
  QpHandle qp_;
  const QpConfig config_;
  const ibv_qp_cap granted_;
  const uint32_t max_message_size_;
  uint32_t psn_ = 0;
  // Set by ModifyToRtr, used by ModifyToRts.
  std::optional<PathParams> path_;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_QUEUE_PAIR_H_
