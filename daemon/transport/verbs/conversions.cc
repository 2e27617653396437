#include "daemon/transport/verbs/conversions.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace rdmad::verbs {

uint32_t MtuToBytes(int mtu) {
  switch (mtu) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
  }
  return 0;
}

absl::StatusOr<ibv_mtu> MtuFromBytes(uint32_t bytes) {
  switch (bytes) {
    case 256:
      return IBV_MTU_256;
    case 512:
      return IBV_MTU_512;
    case 1024:
      return IBV_MTU_1024;
    case 2048:
      return IBV_MTU_2048;
    case 4096:
      return IBV_MTU_4096;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "MTU of ", bytes,
          " bytes is not an RDMA path MTU: use 256, 512, 1024, 2048 or 4096"));
  }
}

Gid GidFromIbv(const ibv_gid& gid) {
  Gid out;
  static_assert(sizeof(gid.raw) == out.size());
  std::memcpy(out.data(), gid.raw, out.size());
  return out;
}

ibv_gid GidToIbv(const Gid& gid) {
  ibv_gid out;
  std::memcpy(out.raw, gid.data(), gid.size());
  return out;
}

std::string GidToText(const Gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  // inet_ntop cannot fail for AF_INET6 with a large enough buffer.
  inet_ntop(AF_INET6, gid.data(), text, sizeof(text));
  return text;
}

absl::StatusOr<Gid> GidFromText(absl::string_view text) {
  Gid out{};
  const std::string copy(text);  // inet_pton needs a NUL-terminated string
  if (inet_pton(AF_INET6, copy.c_str(), out.data()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text,
                     "\" is not a GID: write it as an IPv6 address, e.g. "
                     "\"fe80::1\" or \"::ffff:192.0.2.1\""));
  }
  return out;
}

bool IsIpv4MappedGid(const Gid& gid) {
  // ::ffff:a.b.c.d is ten zero bytes, two 0xff bytes, then the IPv4 address.
  return std::all_of(gid.begin(), gid.begin() + 10,
                     [](uint8_t b) { return b == 0; }) &&
         gid[10] == 0xff && gid[11] == 0xff;
}

bool IsZeroGid(const Gid& gid) {
  return std::all_of(gid.begin(), gid.end(), [](uint8_t b) { return b == 0; });
}

absl::string_view GidTypeName(uint32_t ibv_gid_type) {
  return ibv_gid_type == IBV_GID_TYPE_ROCE_V2 ? kGidTypeRoceV2
                                              : kGidTypeIbRoceV1;
}

std::string GuidToText(uint64_t guid_network_order) {
  uint8_t b[8];
  std::memcpy(b, &guid_network_order, sizeof(b));
  return absl::StrFormat("%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[0], b[1],
                         b[2], b[3], b[4], b[5], b[6], b[7]);
}

core::PortState PortStateFromIbv(int state) {
  switch (state) {
    case IBV_PORT_NOP:
      return core::PortState::kNop;
    case IBV_PORT_DOWN:
      return core::PortState::kDown;
    case IBV_PORT_INIT:
      return core::PortState::kInit;
    case IBV_PORT_ARMED:
      return core::PortState::kArmed;
    case IBV_PORT_ACTIVE:
      return core::PortState::kActive;
    case IBV_PORT_ACTIVE_DEFER:
      return core::PortState::kActiveDefer;
  }
  return core::PortState::kUnknown;
}

std::string LinkLayerName(uint8_t link_layer) {
  switch (link_layer) {
    case IBV_LINK_LAYER_INFINIBAND:
      return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET:
      return "Ethernet";
    default:
      return "Unspecified";
  }
}

std::string TransportName(ibv_transport_type transport) {
  switch (transport) {
    case IBV_TRANSPORT_IB:
      return "InfiniBand";
    case IBV_TRANSPORT_IWARP:
      return "iWARP";
    case IBV_TRANSPORT_USNIC:
      return "usNIC";
    case IBV_TRANSPORT_USNIC_UDP:
      return "usNIC-UDP";
    case IBV_TRANSPORT_UNSPECIFIED:
      return "unspecified";
    case IBV_TRANSPORT_UNKNOWN:
      break;
  }
  return absl::StrCat("UNKNOWN(", static_cast<int>(transport), ")");
}

std::string QpStateName(ibv_qp_state state) {
  switch (state) {
    case IBV_QPS_RESET:
      return "RESET";
    case IBV_QPS_INIT:
      return "INIT";
    case IBV_QPS_RTR:
      return "RTR";
    case IBV_QPS_RTS:
      return "RTS";
    case IBV_QPS_SQD:
      return "SQD";
    case IBV_QPS_SQE:
      return "SQE";
    case IBV_QPS_ERR:
      return "ERR";
    case IBV_QPS_UNKNOWN:
      break;
  }
  return absl::StrCat("UNKNOWN(", static_cast<int>(state), ")");
}

int MrAccessFlags(core::RemoteAccess remote) {
  int flags = IBV_ACCESS_LOCAL_WRITE;
  if (core::Allows(remote, core::RemoteAccess::kRead)) {
    flags |= IBV_ACCESS_REMOTE_READ;
  }
  if (core::Allows(remote, core::RemoteAccess::kWrite)) {
    flags |= IBV_ACCESS_REMOTE_WRITE;
  }
  return flags;
}

absl::StatusCode WcStatusCode(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS:
      return absl::StatusCode::kOk;
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
      return absl::StatusCode::kPermissionDenied;
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
      return absl::StatusCode::kInvalidArgument;
    // The local QP could not carry the request: on soft-RoCE this is how a
    // WR fails once its network device went down. New QPs (or another
    // rail) can carry it: the transport failed, not the request.
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_RESP_TIMEOUT_ERR:
      return absl::StatusCode::kUnavailable;
    case IBV_WC_WR_FLUSH_ERR:
      return absl::StatusCode::kAborted;
    default:
      return absl::StatusCode::kInternal;
  }
}

namespace {

// What to check for each failure, for the operator reading the log.
absl::string_view WcHint(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_REM_ACCESS_ERR:
      return "the remote NIC refused the access: check the rkey, that the "
             "remote address range lies inside the remote region, and that "
             "the region is exported with the needed access (read/write)";
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
      return "the local buffer is not covered by its lkey: check the lkey "
             "and that the local range lies inside the registered region";
    case IBV_WC_LOC_LEN_ERR:
      return "the message is longer than the device allows: split it at the "
             "port's max message size";
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
      return "the remote QP rejected the request as invalid: check that its "
             "access flags allow the operation and the length is within its "
             "max message size";
    case IBV_WC_RETRY_EXC_ERR:
      return "the remote QP did not acknowledge within timeout x retry_cnt: "
             "the peer is unreachable, its QP is not in RTR/RTS, or the "
             "exchanged QPN/GID/PSN is wrong";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "the remote QP had no receive posted within rnr_retry attempts";
    case IBV_WC_WR_FLUSH_ERR:
      return "the work request was flushed because the QP had already gone "
             "to the error state after an earlier failure";
    case IBV_WC_LOC_QP_OP_ERR:
      return "the local QP could not execute it: its port or network device "
             "may be down (ibv_devinfo, ip link)";
    default:
      return "see the device's documentation for this status";
  }
}

}  // namespace

absl::Status CompletionStatus(const ibv_wc& wc) {
  if (wc.status == IBV_WC_SUCCESS) return absl::OkStatus();
  return absl::Status(
      WcStatusCode(wc.status),
      absl::StrFormat(
          "work completion failed: %s (status %d, vendor_err 0x%x) on QP "
          "0x%06x, wr_id %u: %s. The QP is now in the error state; reset and "
          "reconnect it before reuse",
          ibv_wc_status_str(wc.status), static_cast<int>(wc.status),
          wc.vendor_err, wc.qp_num, wc.wr_id, WcHint(wc.status)));
}

}  // namespace rdmad::verbs
