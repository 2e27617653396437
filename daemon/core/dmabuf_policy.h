// dma-buf registration policy: which devices register a client's dma-buf,
// and what the daemon says when none can.
//
// A daemon cannot register another process's virtual memory, but it can
// register a dma-buf by file descriptor: the client exports its GPU memory
// as a dma-buf (CUDA's cuMemGetHandleForAddressRange), passes the
// descriptor on its session socket, and the daemon registers it with
// ibv_reg_dmabuf_mr on every device whose driver supports that (mlx5 and efa
// in rdma-core 44), as probed once when the device is opened. A daemon with
// no RDMA device serves a dma-buf over its TCP transport when it can map it
// for the CPU. The rules are here, pure and unit-tested; the verbs registrar
// makes the ibv_* calls (daemon/transport/verbs/registrar.h).
#ifndef RDMAD_DAEMON_CORE_DMABUF_POLICY_H_
#define RDMAD_DAEMON_CORE_DMABUF_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace rdmad::core {

// What the probe found out about one device.
struct DmabufCapability {
  std::string device;  // "mlx5_0"
  std::string driver;  // "mlx5_core", "rxe"; empty when unknown
  bool supported = false;
  // What the probe saw, for listings and messages:
  // "ibv_reg_dmabuf_mr: Operation not supported (EOPNOTSUPP)".
  std::string probe;
};

// The probe's verdict. The probe calls ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1,
// 0), as NCCL does: where the verb is missing (in the provider or the
// kernel) it fails with EOPNOTSUPP or EPROTONOSUPPORT; where it exists it
// fails on the descriptor -1 instead (EBADF), or on the empty length. Three
// outcomes: those two errors mean unsupported; any other error means
// supported; `registered` (the call returned an MR, which it should never
// do for descriptor -1; the caller deregisters it) means supported.
DmabufCapability ClassifyDmabufProbe(std::string device, std::string driver,
                                     bool registered, int error);

// "rxe0 (rxe): ibv_reg_dmabuf_mr: Operation not supported (EOPNOTSUPP)".
std::string DescribeDmabufCapability(const DmabufCapability& capability);

// A dma-buf range to register: `length` bytes from `offset` in the dma-buf
// `fd`, which the devices address as `iova` (it has the page offset of
// `offset`, as ibv_reg_dmabuf_mr requires).
struct DmabufRange {
  int fd = -1;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t iova = 0;
};

// OK when this daemon can serve a dma-buf: some device supports dma-buf,
// or the daemon has no RDMA device (TCP only) and could map it for the CPU
// (`cpu_map_error` empty). Otherwise FAILED_PRECONDITION, starting "no
// device supports dma-buf", naming each device, its driver and what its
// probe saw, and what would work: a NIC whose driver registers dma-bufs
// (mlx5, efa), or the TCP transport where the CPU can map the dma-buf.
absl::Status CheckDmabufServable(absl::Span<const DmabufCapability> devices,
                                 absl::string_view cpu_map_error);

// Registers a dma-buf on every device of `devices` that supports it, in
// order, with `register_on(index)`: all or nothing. When one fails, the
// registrations already made are destroyed (which deregisters them) before
// the error, naming that device, is returned; no device is left with part
// of a region. `Registered` is an owning handle (a unique_ptr whose
// destructor deregisters). Devices without support are skipped: the
// caller checked CheckDmabufServable first.
template <typename Registered>
absl::StatusOr<std::vector<Registered>> RegisterOnDmabufDevices(
    absl::Span<const DmabufCapability> devices,
    absl::FunctionRef<absl::StatusOr<Registered>(size_t index)> register_on) {
  std::vector<Registered> made;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i].supported) continue;
    absl::StatusOr<Registered> one = register_on(i);
    if (!one.ok()) {
      const size_t undone = made.size();
      made.clear();  // deregisters every one made so far
      return absl::Status(
          one.status().code(),
          absl::StrCat("registering the dma-buf on ", devices[i].device,
                       " failed: ", one.status().message(),
                       undone == 0
                           ? std::string()
                           : absl::StrCat(" (its registrations on ", undone,
                                          " other device(s) were undone)")));
    }
    made.push_back(*std::move(one));
  }
  return made;
}

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_DMABUF_POLICY_H_
