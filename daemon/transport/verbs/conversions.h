// Conversions between libibverbs values and the plain values rdmad uses.
//
// Pure functions: no device is touched, so they are unit-tested on hosts
// without RDMA hardware. Everything that turns an ibv_* enum into text or an
// absl::Status lives here, so all messages read the same.
//
// Example:
//   RDMAD_ASSIGN_OR_RETURN(ibv_mtu mtu, MtuFromBytes(1024));  // IBV_MTU_1024
//   MtuToBytes(IBV_MTU_4096);                                 // 4096
//   GidToText(gid);               // "::ffff:192.0.2.1"
//   absl::Status s = CompletionStatus(wc);  // OK, or names ibv_wc_status_str
//
// Thread-safety: all functions are thread-safe.
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_CONVERSIONS_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_CONVERSIONS_H_

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/device_info.h"
#include "daemon/core/memory_registrar.h"

namespace rdmad::verbs {

// A GID in network byte order, as carried in QpEndpoint.gid.
using Gid = std::array<uint8_t, 16>;

// The "RoCEv2" / "IB/RoCEv1" strings of core::GidInfo::type.
inline constexpr absl::string_view kGidTypeRoceV2 = "RoCEv2";
inline constexpr absl::string_view kGidTypeIbRoceV1 = "IB/RoCEv1";

// Returns the MTU in bytes (256..4096), or 0 for a value outside the enum.
// Takes the raw value (an ibv_mtu converts): a provider may report one that
// this libibverbs does not define, and an ibv_mtu cannot hold that (loading
// it is undefined behaviour, which UBSan reports).
uint32_t MtuToBytes(int mtu);

// Returns the enum for an MTU of exactly `bytes` (256, 512, 1024, 2048 or
// 4096); InvalidArgument for anything else.
absl::StatusOr<ibv_mtu> MtuFromBytes(uint32_t bytes);

// Copies between the ibv_gid union and the byte array (both network order).
Gid GidFromIbv(const ibv_gid& gid);
ibv_gid GidToIbv(const Gid& gid);

// IPv6 text form of a GID, e.g. "fe80::1" or "::ffff:192.0.2.1".
std::string GidToText(const Gid& gid);

// Parses the IPv6 text form; InvalidArgument if it is not an IPv6 address.
absl::StatusOr<Gid> GidFromText(absl::string_view text);

// True for an IPv4-mapped IPv6 GID (::ffff:a.b.c.d), which is what a RoCEv2
// GID of an IPv4 address looks like.
bool IsIpv4MappedGid(const Gid& gid);

// True when all 16 bytes are zero (an unused GID table slot).
bool IsZeroGid(const Gid& gid);

// "RoCEv2" for IBV_GID_TYPE_ROCE_V2, "IB/RoCEv1" for the other types.
absl::string_view GidTypeName(uint32_t ibv_gid_type);

// A node or port GUID as returned by ibv_get_device_guid (network byte
// order) in the usual "xxxx:xxxx:xxxx:xxxx" form.
std::string GuidToText(uint64_t guid_network_order);

// An ibv_port_state as core's PortState; kUnknown for any other value.
// Takes the raw value, as MtuToBytes does.
core::PortState PortStateFromIbv(int state);

// "InfiniBand", "Ethernet" or "Unspecified".
std::string LinkLayerName(uint8_t link_layer);

// "InfiniBand", "iWARP", "usNIC", "usNIC-UDP", "unspecified" or "UNKNOWN(n)".
// Note: RoCE devices report the InfiniBand transport; the port's link layer
// says Ethernet.
std::string TransportName(ibv_transport_type transport);

// "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" or "UNKNOWN(n)".
std::string QpStateName(ibv_qp_state state);

// ibv_reg_mr access flags for a registration granting `remote`: always
// IBV_ACCESS_LOCAL_WRITE (the NIC writes READ results and the client writes
// its own buffer), plus IBV_ACCESS_REMOTE_READ / IBV_ACCESS_REMOTE_WRITE as
// requested. Never remote atomics: the API has no atomic operations.
int MrAccessFlags(core::RemoteAccess remote);

// The canonical code for a failed work completion: PermissionDenied for
// remote/local access violations, InvalidArgument for requests the NIC
// rejected as malformed, Unavailable when the peer did not answer (retry
// exceeded) or the local QP could not send (its link is down), Aborted for
// work flushed from a QP already in error, Internal otherwise. OK for
// IBV_WC_SUCCESS.
absl::StatusCode WcStatusCode(ibv_wc_status status);

// OK for a successful completion; otherwise a status with WcStatusCode whose
// message names ibv_wc_status_str, the numeric status, vendor_err, the local
// QP number and wr_id, and says what to check. Only the fields a failed
// completion defines (wr_id, status, qp_num, vendor_err) are read.
absl::Status CompletionStatus(const ibv_wc& wc);

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_CONVERSIONS_H_
