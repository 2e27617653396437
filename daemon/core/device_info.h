// Plain description of an RDMA device, filled by the verbs transport's
// discovery and read by the core and the service layer. No ibv_* types here,
// so everything above the transport builds and tests without rdma-core.
#ifndef RDMAD_DAEMON_CORE_DEVICE_INFO_H_
#define RDMAD_DAEMON_CORE_DEVICE_INFO_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace rdmad::core {

// One valid (non-zero) entry of a port's GID table.
struct GidInfo {
  uint32_t index = 0;
  std::array<uint8_t, 16> raw{};  // the GID in network byte order
  std::string text;               // IPv6 text form, e.g. "::ffff:192.0.2.1"
  std::string type;               // "RoCEv2" or "IB/RoCEv1"
  std::string netdev;             // associated network device, if known
};

// A port's state as its device reports it (ibv_port_state); kUnknown for a
// value rdma-core does not define.
enum class PortState : uint8_t {
  kUnknown,
  kNop,
  kDown,
  kInit,
  kArmed,
  kActive,
  kActiveDefer,
};

// "ACTIVE", "DOWN", "INIT", "ARMED", "ACTIVE_DEFER", "NOP", "UNKNOWN": the
// words of ibv_devinfo, GetDevices (PortInfo.state) and error messages.
constexpr absl::string_view PortStateName(PortState state) {
  switch (state) {
    case PortState::kNop:
      return "NOP";
    case PortState::kDown:
      return "DOWN";
    case PortState::kInit:
      return "INIT";
    case PortState::kArmed:
      return "ARMED";
    case PortState::kActive:
      return "ACTIVE";
    case PortState::kActiveDefer:
      return "ACTIVE_DEFER";
    case PortState::kUnknown:
      break;
  }
  return "UNKNOWN";
}

struct PortInfo {
  uint32_t port = 0;         // 1-based
  PortState state = PortState::kUnknown;
  std::string link_layer;    // "InfiniBand" or "Ethernet"
  uint32_t active_mtu = 0;   // bytes
  uint32_t max_mtu = 0;      // bytes
  uint32_t lid = 0;
  uint32_t max_msg_size = 0;
  std::vector<GidInfo> gids;
};

struct DeviceLimits {
  uint64_t max_mr_size = 0;
  uint32_t max_qp = 0;
  uint32_t max_qp_wr = 0;
  uint32_t max_sge = 0;
  uint32_t max_cq = 0;
  uint32_t max_cqe = 0;
  uint32_t max_mr = 0;
  uint32_t max_pd = 0;
  uint32_t max_qp_rd_atom = 0;
  uint32_t max_qp_init_rd_atom = 0;
};

struct DeviceInfo {
  std::string name;       // e.g. "rxe0"
  std::string node_guid;  // "xxxx:xxxx:xxxx:xxxx"
  std::string transport;  // "InfiniBand", "iWARP", ...
  // Kernel driver ("mlx5_core", "efa"; "rxe" for soft-RoCE), or empty.
  std::string driver;
  std::vector<PortInfo> ports;
  DeviceLimits limits;
  // Whether ibv_reg_dmabuf_mr works on it (probed when the device is
  // opened; see dmabuf_policy.h) and what the probe saw.
  bool dmabuf = false;
  std::string dmabuf_probe;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_DEVICE_INFO_H_
