#include "daemon/transport/verbs/queue_pair.h"

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/secure_random.h"
#include "common/status_macros.h"

namespace rdmad::verbs {
namespace {

constexpr uint32_t kMax24Bit = (1u << 24) - 1;

// A random starting PSN, so a new connection is not confused with packets
// of an old one that reused the QPN, and so an off-path attacker cannot
// predict it to inject packets (hence the kernel's getrandom, not BitGen).
uint32_t RandomPsn() {
  return static_cast<uint32_t>(SecureRandom64()) & kMax24Bit;
}

uint8_t ClampToU8(uint32_t v) {
  return static_cast<uint8_t>(std::min<uint32_t>(v, 255));
}

}  // namespace

uint8_t ResponderResources(const QpConfig& config, const LocalLimits& local) {
  return ClampToU8(std::max<uint32_t>(
      1, std::min(config.max_dest_rd_atomic, local.max_qp_rd_atom)));
}

absl::StatusOr<PathParams> ResolvePath(const QpConfig& config,
                                       const LocalLimits& local,
                                       const QpEndpoint& remote) {
  if (remote.qpn == 0 || remote.qpn > kMax24Bit) {
    // Connection parameters stay out of messages (they end up in logs).
    return absl::InvalidArgumentError(
        "the remote QPN is not a valid RC QP number (1..0xffffff): the peer "
        "sent a bad endpoint");
  }
  if (remote.psn > kMax24Bit) {
    return absl::InvalidArgumentError(
        "the remote PSN does not fit in 24 bits: the peer sent a bad "
        "endpoint");
  }
  if (!MtuFromBytes(remote.mtu).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("remote MTU ", remote.mtu,
                     " is not 256, 512, 1024, 2048 or 4096: the peer sent a "
                     "bad endpoint"));
  }
  if (!MtuFromBytes(local.active_mtu).ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("local port active MTU ", local.active_mtu,
                     " is not a valid RDMA MTU: is the port up?"));
  }
  uint32_t mtu = std::min(local.active_mtu, remote.mtu);
  if (config.path_mtu != 0) {
    RDMAD_RETURN_IF_ERROR(MtuFromBytes(config.path_mtu).status());
    mtu = std::min(mtu, config.path_mtu);
  }

  PathParams params;
  RDMAD_ASSIGN_OR_RETURN(params.path_mtu, MtuFromBytes(mtu));
  params.use_grh = local.ethernet || local.grh_required;
  if (params.use_grh && IsZeroGid(remote.gid)) {
    return absl::InvalidArgumentError(
        "remote GID is all zeros but this port needs a GRH (RoCE): the peer "
        "must send the GID of the index it chose");
  }
  if (!params.use_grh && remote.lid == 0) {
    return absl::InvalidArgumentError(
        "remote LID is 0 on an InfiniBand port: the peer's port has no LID "
        "(is a subnet manager running?)");
  }
  // The peer accepts remote.max_rd_atomic READs; we may issue no more than
  // that and than our device can track.
  const uint32_t peer_accepts =
      remote.max_rd_atomic == 0 ? 1 : remote.max_rd_atomic;
  params.max_rd_atomic = ClampToU8(std::max<uint32_t>(
      1, std::min(
             {config.max_rd_atomic, local.max_qp_init_rd_atom, peer_accepts})));
  params.max_dest_rd_atomic = ResponderResources(config, local);
  return params;
}

void BuildSendChain(absl::Span<const RdmaOp> ops, absl::Span<ibv_send_wr> wrs,
                    absl::Span<ibv_sge> sges) {
  for (size_t i = 0; i < ops.size(); ++i) {
    const RdmaOp& op = ops[i];
    ibv_sge& sge = sges[i];
    sge.addr = reinterpret_cast<uintptr_t>(op.local_addr);
    sge.length = op.length;
    sge.lkey = op.lkey;
    ibv_send_wr& wr = wrs[i];
    wr = ibv_send_wr{};
    wr.wr_id = op.wr_id;
    wr.next = i + 1 < ops.size() ? &wrs[i + 1] : nullptr;
    // A zero-length operation carries no data and needs no gather entry.
    wr.sg_list = op.length > 0 ? &sge : nullptr;
    wr.num_sge = op.length > 0 ? 1 : 0;
    switch (op.opcode) {
      case RdmaOp::Opcode::kWrite:
        wr.opcode = IBV_WR_RDMA_WRITE;
        break;
      case RdmaOp::Opcode::kRead:
        wr.opcode = IBV_WR_RDMA_READ;
        break;
      case RdmaOp::Opcode::kSend:
        wr.opcode = IBV_WR_SEND;
        break;
    }
    unsigned int flags = 0;
    if (op.signaled) flags |= IBV_SEND_SIGNALED;
    if (op.inline_data) flags |= IBV_SEND_INLINE;
    wr.send_flags = flags;
    if (op.opcode != RdmaOp::Opcode::kSend) {
      wr.wr.rdma.remote_addr = op.remote_addr;
      wr.wr.rdma.rkey = op.rkey;
    }
  }
}

QueuePair::QueuePair(std::shared_ptr<CompletionQueue> cq, QpHandle qp,
                     const QpConfig& config, const ibv_qp_cap& granted,
                     uint32_t max_message_size)
    : cq_(std::move(cq)),
      qp_(std::move(qp)),
      config_(config),
      granted_(granted),
      max_message_size_(max_message_size),
      psn_(RandomPsn()) {}

absl::StatusOr<std::unique_ptr<QueuePair>> QueuePair::Create(
    std::shared_ptr<CompletionQueue> cq, const QpConfig& config) {
  const Device& device = *cq->device();
  RDMAD_ASSIGN_OR_RETURN(ibv_port_attr port, device.QueryPort(config.port));
  // The GRH carries the index in 8 bits; a larger one is a config mistake.
  if (config.gid_index >=
          static_cast<uint32_t>(std::max(port.gid_tbl_len, 0)) ||
      config.gid_index > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GID index ", config.gid_index, " is outside the GID table of ",
        device.name(), " port ", config.port, " (", port.gid_tbl_len,
        " entries): choose it with ChooseGidIndex"));
  }

  ibv_qp_init_attr init{};
  init.send_cq = cq->cq();
  init.recv_cq = cq->cq();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = config.max_send_wr;
  init.cap.max_recv_wr = config.max_recv_wr;
  init.cap.max_send_sge = config.max_send_sge;
  init.cap.max_recv_sge = config.max_recv_sge;
  init.cap.max_inline_data = config.max_inline_data;
  if (config.srq != nullptr) {
    init.srq = config.srq;
    init.cap.max_recv_wr = 0;
    init.cap.max_recv_sge = 0;
  }
  QpHandle qp(ibv_create_qp(device.pd(), &init));
  if (qp == nullptr) {
    const ibv_device_attr& attr = device.attributes();
    return absl::ErrnoToStatus(
        errno,
        absl::StrFormat(
            "ibv_create_qp(%s, RC, send_wr %u, send_sge %u, inline %u): "
            "stay within the device limits (max_qp %d, max_qp_wr %d, "
            "max_sge %d) and the locked-memory limit",
            device.name(), config.max_send_wr, config.max_send_sge,
            config.max_inline_data, attr.max_qp, attr.max_qp_wr, attr.max_sge));
  }
  return std::unique_ptr<QueuePair>(new QueuePair(
      std::move(cq), std::move(qp), config, init.cap, port.max_msg_sz));
}

LocalLimits QueuePair::LimitsFrom(const ibv_port_attr& port) const {
  const ibv_device_attr& device = cq_->device()->attributes();
  LocalLimits local;
  local.active_mtu = MtuToBytes(port.active_mtu);
  local.ethernet = port.link_layer == IBV_LINK_LAYER_ETHERNET;
  local.grh_required = (port.flags & IBV_QPF_GRH_REQUIRED) != 0;
  local.max_qp_rd_atom =
      static_cast<uint32_t>(std::max(device.max_qp_rd_atom, 0));
  local.max_qp_init_rd_atom =
      static_cast<uint32_t>(std::max(device.max_qp_init_rd_atom, 0));
  return local;
}

absl::StatusOr<QpEndpoint> QueuePair::LocalEndpoint() const {
  const Device& device = *cq_->device();
  RDMAD_ASSIGN_OR_RETURN(ibv_port_attr port, device.QueryPort(config_.port));
  const LocalLimits local = LimitsFrom(port);
  QpEndpoint endpoint;
  endpoint.qpn = qpn();
  endpoint.psn = psn_;
  endpoint.gid_index = config_.gid_index;
  endpoint.lid = port.lid;
  endpoint.mtu = local.active_mtu;
  endpoint.max_rd_atomic = ResponderResources(config_, local);
  // On InfiniBand without a GRH the GID is informational; still send it.
  absl::StatusOr<ibv_gid_entry> gid =
      device.QueryGid(config_.port, config_.gid_index);
  if (gid.ok()) {
    endpoint.gid = GidFromIbv(gid->gid);
  } else if (local.ethernet || local.grh_required) {
    return gid.status();
  }
  return endpoint;
}

absl::StatusOr<ibv_qp_state> QueuePair::QueryState() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (int rc = ibv_query_qp(qp_.get(), &attr, IBV_QP_STATE, &init); rc != 0) {
    return absl::ErrnoToStatus(rc, "ibv_query_qp");
  }
  return attr.qp_state;
}

absl::Status QueuePair::Modify(ibv_qp_attr& attr, int mask,
                               absl::string_view step) {
  if (int rc = ibv_modify_qp(qp_.get(), &attr, mask); rc != 0) {
    return absl::ErrnoToStatus(
        rc, absl::StrFormat("ibv_modify_qp(on %s, %s)", cq_->device()->name(),
                            step));
  }
  return absl::OkStatus();
}

absl::Status QueuePair::ModifyToInit() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(config_.port);
  // The QP lets peers READ and WRITE; each MR's own access flags then decide
  // what a given rkey permits.
  attr.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  return Modify(
      attr,
      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
      absl::StrCat("RESET->INIT, port ", config_.port,
                   ": is the port number valid?"));
}

absl::Status QueuePair::ModifyToRtr(const QpEndpoint& remote) {
  RDMAD_ASSIGN_OR_RETURN(ibv_port_attr port,
                         cq_->device()->QueryPort(config_.port));
  RDMAD_ASSIGN_OR_RETURN(PathParams path,
                         ResolvePath(config_, LimitsFrom(port), remote));

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = path.path_mtu;
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = path.max_dest_rd_atomic;
  attr.min_rnr_timer = config_.min_rnr_timer;
  attr.ah_attr.dlid = static_cast<uint16_t>(remote.lid);
  attr.ah_attr.sl = config_.service_level;
  attr.ah_attr.src_path_bits = 0;
  attr.ah_attr.port_num = static_cast<uint8_t>(config_.port);
  if (path.use_grh) {
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.dgid = GidToIbv(remote.gid);
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(config_.gid_index);
    attr.ah_attr.grh.hop_limit = config_.hop_limit;
    attr.ah_attr.grh.traffic_class = config_.traffic_class;
    attr.ah_attr.grh.flow_label = 0;
  }
  RDMAD_RETURN_IF_ERROR(Modify(
      attr,
      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
          IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
      absl::StrFormat(
          "INIT->RTR to QP 0x%06x gid %s lid %u, path MTU %u, sgid index %u: "
          "check that the sgid index is valid on port %u and of the same "
          "type as the peer's GID",
          remote.qpn, GidToText(remote.gid), remote.lid,
          MtuToBytes(path.path_mtu), config_.gid_index, config_.port)));
  path_ = path;
  return absl::OkStatus();
}

absl::Status QueuePair::ModifyToRts() {
  if (!path_.has_value()) {
    return absl::FailedPreconditionError(
        "QueuePair::ModifyToRts before ModifyToRtr: connect the QP to its "
        "peer first");
  }
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = psn_;
  attr.timeout = config_.timeout;
  attr.retry_cnt = config_.retry_cnt;
  attr.rnr_retry = config_.rnr_retry;
  attr.max_rd_atomic = path_->max_rd_atomic;
  return Modify(attr,
                IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
                    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                    IBV_QP_MAX_QP_RD_ATOMIC,
                "RTR->RTS");
}

absl::Status QueuePair::Connect(const QpEndpoint& remote) {
  RDMAD_ASSIGN_OR_RETURN(ibv_qp_state state, QueryState());
  if (state == IBV_QPS_RESET) {
    RDMAD_RETURN_IF_ERROR(ModifyToInit());
  } else if (state != IBV_QPS_INIT) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "QP 0x%06x is in state %s; Connect needs RESET or INIT: call Reset() "
        "first",
        qpn(), QpStateName(state)));
  }
  RDMAD_RETURN_IF_ERROR(ModifyToRtr(remote));
  return ModifyToRts();
}

absl::Status QueuePair::Reset() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RESET;
  RDMAD_RETURN_IF_ERROR(Modify(attr, IBV_QP_STATE, "->RESET"));
  psn_ = RandomPsn();
  path_.reset();
  return absl::OkStatus();
}

absl::Status QueuePair::ModifyToError() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return Modify(attr, IBV_QP_STATE, "->ERR");
}

absl::Status QueuePair::PostWrite(RdmaOp op) {
  op.opcode = RdmaOp::Opcode::kWrite;
  return Post(absl::MakeConstSpan(&op, 1));
}

absl::Status QueuePair::PostRead(RdmaOp op) {
  op.opcode = RdmaOp::Opcode::kRead;
  return Post(absl::MakeConstSpan(&op, 1));
}

absl::Status QueuePair::Post(absl::Span<const RdmaOp> ops, size_t* posted) {
  if (posted != nullptr) *posted = 0;
  if (ops.empty()) return absl::OkStatus();
  for (size_t i = 0; i < ops.size(); ++i) {
    const RdmaOp& op = ops[i];
    const bool can_inline = op.opcode != RdmaOp::Opcode::kRead;
    if (op.length > max_message_size_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "work request ", i, " (wr_id ", op.wr_id, ") is ", op.length,
          " bytes, more than the port's max message size ", max_message_size_,
          ": split the transfer"));
    }
    if (op.inline_data && !can_inline) {
      return absl::InvalidArgumentError(absl::StrCat(
          "work request ", i, " (wr_id ", op.wr_id,
          ") asks for inline data on an RDMA READ: only WRITEs and SENDs can "
          "be inline"));
    }
    if (op.inline_data && op.length > granted_.max_inline_data) {
      return absl::InvalidArgumentError(absl::StrCat(
          "work request ", i, " (wr_id ", op.wr_id, ") is ", op.length,
          " bytes inline, more than this QP's max_inline_data ",
          granted_.max_inline_data, ": post it from a registered buffer"));
    }
  }

  // The chain lives on the stack (see kMaxChainOnStack): posting is on
  // every operation's path, and a thread-local or per-QP buffer would break
  // the concurrent posts this class allows.
  ibv_send_wr stack_wrs[kMaxChainOnStack];
  ibv_sge stack_sges[kMaxChainOnStack];
  std::vector<ibv_send_wr> heap_wrs;
  std::vector<ibv_sge> heap_sges;
  absl::Span<ibv_send_wr> wrs(stack_wrs,
                              std::min(ops.size(), kMaxChainOnStack));
  absl::Span<ibv_sge> sges(stack_sges, wrs.size());
  if (ops.size() > kMaxChainOnStack) {
    heap_wrs.resize(ops.size());
    heap_sges.resize(ops.size());
    wrs = absl::MakeSpan(heap_wrs);
    sges = absl::MakeSpan(heap_sges);
  }
  BuildSendChain(ops, wrs, sges);

  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_.get(), wrs.data(), &bad); rc != 0) {
    const size_t index =
        bad != nullptr ? static_cast<size_t>(bad - wrs.data()) : 0;
    if (posted != nullptr) *posted = index;
    std::string hint;
    if (rc == ENOMEM) {
      hint = absl::StrCat(
          ": the send queue is full (", granted_.max_send_wr,
          " WRs); wait for completions first, and signal at least every ",
          granted_.max_send_wr, "th WR");
    } else if (rc == EINVAL) {
      hint = ": is the QP in RTS? A QP in ERR must be Reset() and reconnected";
    }
    return absl::ErrnoToStatus(
        rc, absl::StrFormat(
                "ibv_post_send(QP 0x%06x) refused work request %u of %u "
                "(wr_id %u); the %u before it were posted%s",
                qpn(), index, ops.size(),
                ops[std::min(index, ops.size() - 1)].wr_id, index, hint));
  }
  if (posted != nullptr) *posted = ops.size();
  return absl::OkStatus();
}

absl::Status QueuePair::PostRecv(uint64_t wr_id, void* addr, uint32_t length,
                                 uint32_t lkey) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(addr);
  sge.length = length;
  sge.lkey = lkey;
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_.get(), &wr, &bad); rc != 0) {
    return absl::ErrnoToStatus(
        rc,
        absl::StrFormat("ibv_post_recv(QP 0x%06x, %u bytes)%s", qpn(), length,
                        rc == ENOMEM ? ": the receive queue is full" : ""));
  }
  return absl::OkStatus();
}

}  // namespace rdmad::verbs
