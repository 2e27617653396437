#include "daemon/core/dmabuf_policy.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rdmad::core {
namespace {

// "Operation not supported (EOPNOTSUPP)" for the errors the probe meets.
std::string ErrnoText(int error) {
  const char* name = nullptr;
  switch (error) {
    case EOPNOTSUPP:
      name = "EOPNOTSUPP";
      break;
    case EPROTONOSUPPORT:
      name = "EPROTONOSUPPORT";
      break;
    case EBADF:
      name = "EBADF";
      break;
    case EINVAL:
      name = "EINVAL";
      break;
    default:
      break;
  }
  return name != nullptr
             ? absl::StrCat(std::strerror(error), " (", name, ")")
             : absl::StrCat(std::strerror(error), " (errno ", error, ")");
}

}  // namespace

DmabufCapability ClassifyDmabufProbe(std::string device, std::string driver,
                                     bool registered, int error) {
  DmabufCapability capability;
  capability.device = std::move(device);
  capability.driver = std::move(driver);
  if (registered) {
    capability.supported = true;
    capability.probe = "ibv_reg_dmabuf_mr: supported (it accepted the probe)";
  } else if (error == EOPNOTSUPP || error == EPROTONOSUPPORT) {
    capability.supported = false;
    capability.probe = absl::StrCat("ibv_reg_dmabuf_mr: ", ErrnoText(error));
  } else {
    // The verb exists and refused the probe's descriptor -1 (or length 0).
    capability.supported = true;
    capability.probe = absl::StrCat(
        "ibv_reg_dmabuf_mr: supported (the probe "
        "got ",
        ErrnoText(error), ")");
  }
  return capability;
}

std::string DescribeDmabufCapability(const DmabufCapability& capability) {
  return absl::StrCat(capability.device, " (driver ",
                      capability.driver.empty() ? "unknown" : capability.driver,
                      "): ", capability.probe);
}

absl::Status CheckDmabufServable(absl::Span<const DmabufCapability> devices,
                                 absl::string_view cpu_map_error) {
  for (const DmabufCapability& device : devices) {
    if (device.supported) return absl::OkStatus();
  }
  if (devices.empty()) {
    if (cpu_map_error.empty()) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "no device supports dma-buf: this rdmad has no RDMA device (it moves "
        "data over TCP), and its TCP transport needs to map the dma-buf for "
        "the CPU, which the dma-buf's exporter refused (",
        cpu_map_error,
        "; CUDA's dma-bufs usually cannot be mapped). Register it with an "
        "rdmad on a node whose RDMA NIC's driver registers dma-bufs (mlx5, "
        "efa)"));
  }
  std::vector<std::string> described;
  described.reserve(devices.size());
  for (const DmabufCapability& device : devices) {
    described.push_back(DescribeDmabufCapability(device));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no device supports dma-buf: ", absl::StrJoin(described, "; "),
      ". An RDMA NIC whose driver registers dma-bufs (mlx5, efa) would; "
      "or run rdmad with --transport tcp, whose transport serves a dma-buf "
      "the CPU can map (",
      cpu_map_error.empty() ? std::string("this one can")
                            : absl::StrCat("this one cannot: ", cpu_map_error),
      ")"));
}

}  // namespace rdmad::core
