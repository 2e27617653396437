// Whether a device registers dma-bufs, asked once when it is opened.
//
// ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0) registers nothing: where the verb is
// missing (the provider, e.g. rxe in rdma-core 44, or the kernel) it fails
// with EOPNOTSUPP; where it exists it fails on the descriptor -1. NCCL asks
// the same way. core::ClassifyDmabufProbe reads the answer.
//
// Example:
//   core::DmabufCapability rxe = ProbeDmabuf(device->pd(), "rxe0", "rxe");
//   if (!rxe.supported) spdlog::info("{}", rxe.probe);
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_DMABUF_PROBE_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_DMABUF_PROBE_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "daemon/core/dmabuf_policy.h"

namespace rdmad::verbs {

// The two verbs the probe calls; tests replace them.
struct DmabufProbeVerbs {
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, uint64_t offset, size_t length,
                           uint64_t iova, int fd,
                           int access) = ibv_reg_dmabuf_mr;
  int (*dereg_mr)(ibv_mr* mr) = ibv_dereg_mr;
};

// Probes `pd`'s device (`device`, `driver` name it in the result). An MR
// the probe got back anyway is deregistered at once. Thread-safe.
core::DmabufCapability ProbeDmabuf(ibv_pd* pd, std::string device,
                                   std::string driver,
                                   const DmabufProbeVerbs& verbs = {});

// The kernel driver of the device called `device`, from sysfs: the PCI
// driver a NIC is bound to ("mlx5_core", "efa"), "rxe" for soft-RoCE (whose
// devices have a parent network device instead), or empty.
std::string DeviceDriver(const std::string& device);

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_DMABUF_PROBE_H_
