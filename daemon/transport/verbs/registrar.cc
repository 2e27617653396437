#include "daemon/transport/verbs/registrar.h"

#include <cerrno>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "daemon/transport/verbs/conversions.h"
#include "daemon/transport/verbs/dmabuf_probe.h"

namespace rdmad::verbs {

MemoryRegion::MemoryRegion(std::shared_ptr<Device> device, MrHandle mr)
    : device_(std::move(device)), mr_(std::move(mr)) {}

absl::StatusOr<std::unique_ptr<MemoryRegion>> MemoryRegion::Register(
    std::shared_ptr<Device> device, void* addr, size_t length, int access) {
  if (addr == nullptr || length == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot register %u bytes at %p: give a non-null "
                        "address and a non-zero length",
                        length, addr));
  }
  MrHandle mr(ibv_reg_mr(device->pd(), addr, length, access));
  if (mr == nullptr) {
    const int error = errno;
    std::string hint;
    if (error == ENOMEM || error == EAGAIN) {
      hint =
          ": raise the locked-memory limit (ulimit -l, LimitMEMLOCK= in the "
          "systemd unit) or register less memory";
    } else if (error == EFAULT) {
      hint = ": the range is not mapped in this process";
    } else if (error == EINVAL || error == EOPNOTSUPP) {
      hint = ": the device does not support these access flags or this range";
    }
    return absl::ErrnoToStatus(
        error, absl::StrCat("ibv_reg_mr(", device->name(), ", ", length,
                            " bytes, access 0x", absl::Hex(access), ")", hint));
  }
  return std::unique_ptr<MemoryRegion>(
      new MemoryRegion(std::move(device), std::move(mr)));
}

absl::StatusOr<std::unique_ptr<MemoryRegion>> MemoryRegion::RegisterDmabuf(
    std::shared_ptr<Device> device, const core::DmabufRange& range,
    int access) {
  if (range.fd < 0 || range.length == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot register ", range.length, " bytes of dma-buf descriptor ",
        range.fd, ": give an open dma-buf and a non-zero length"));
  }
  MrHandle mr(ibv_reg_dmabuf_mr(device->pd(), range.offset, range.length,
                                range.iova, range.fd, access));
  if (mr == nullptr) {
    const int error = errno;
    std::string hint;
    if (error == EOPNOTSUPP || error == EPROTONOSUPPORT) {
      hint = ": this device's driver does not register dma-bufs (mlx5 and "
             "efa do)";
    } else if (error == ENOMEM || error == EAGAIN) {
      hint = ": the device or the exporter is out of resources; register "
             "less memory";
    } else if (error == EINVAL) {
      hint = ": the exporter refused the range or these access flags";
    }
    return absl::ErrnoToStatus(
        error, absl::StrCat("ibv_reg_dmabuf_mr(", device->name(), ", offset ",
                            range.offset, ", ", range.length,
                            " bytes, access 0x", absl::Hex(access), ")",
                            hint));
  }
  return std::unique_ptr<MemoryRegion>(
      new MemoryRegion(std::move(device), std::move(mr)));
}

namespace {

std::vector<core::DmabufCapability> ProbeAll(
    const std::vector<std::shared_ptr<Device>>& devices) {
  std::vector<core::DmabufCapability> capabilities;
  capabilities.reserve(devices.size());
  for (const std::shared_ptr<Device>& device : devices) {
    capabilities.push_back(ProbeDmabuf(device->pd(), device->name(),
                                       DeviceDriver(device->name())));
  }
  return capabilities;
}

}  // namespace

VerbsRegistration::VerbsRegistration(
    std::vector<std::unique_ptr<MemoryRegion>> mrs)
    : regions_(std::move(mrs)) {
  keys_.reserve(regions_.size());
  for (const auto& region : regions_) {
    keys_.push_back(core::DeviceRegistration{region->device().name(),
                                             region->lkey(), region->rkey()});
  }
}

const MemoryRegion* VerbsRegistration::RegionOn(
    absl::string_view device) const {
  for (const auto& region : regions_) {
    if (region->device().name() == device) return region.get();
  }
  return nullptr;
}

VerbsRegistrar::VerbsRegistrar(std::vector<std::shared_ptr<Device>> devices)
    : devices_(std::move(devices)), dmabuf_(ProbeAll(devices_)) {}

absl::StatusOr<std::unique_ptr<VerbsRegistrar>> VerbsRegistrar::OpenAll() {
  RDMAD_ASSIGN_OR_RETURN(std::vector<core::DeviceInfo> infos,
                         DiscoverDevices());
  std::vector<std::shared_ptr<Device>> devices;
  devices.reserve(infos.size());
  for (const core::DeviceInfo& info : infos) {
    RDMAD_ASSIGN_OR_RETURN(std::shared_ptr<Device> device,
                           OpenDevice(info.name));
    devices.push_back(std::move(device));
  }
  return std::make_unique<VerbsRegistrar>(std::move(devices));
}

absl::StatusOr<std::unique_ptr<core::Registration>> VerbsRegistrar::Register(
    void* addr, size_t length, core::RemoteAccess remote) {
  RDMAD_ASSIGN_OR_RETURN(std::unique_ptr<VerbsRegistration> registration,
                         RegisterVerbs(addr, length, remote));
  return std::unique_ptr<core::Registration>(std::move(registration));
}

absl::StatusOr<std::unique_ptr<VerbsRegistration>>
VerbsRegistrar::RegisterVerbs(void* addr, size_t length,
                              core::RemoteAccess remote) {
  // Checked here too so a registrar without devices rejects the same input.
  if (addr == nullptr || length == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cannot register %u bytes at %p: give a non-null "
                        "address and a non-zero length",
                        length, addr));
  }
  const int access = MrAccessFlags(remote);
  std::vector<std::unique_ptr<MemoryRegion>> regions;
  regions.reserve(devices_.size());
  for (const std::shared_ptr<Device>& device : devices_) {
    // On failure `regions` goes out of scope and deregisters what was made.
    RDMAD_ASSIGN_OR_RETURN(
        std::unique_ptr<MemoryRegion> region,
        MemoryRegion::Register(device, addr, length, access));
    regions.push_back(std::move(region));
  }
  return std::make_unique<VerbsRegistration>(std::move(regions));
}

absl::StatusOr<std::unique_ptr<core::Registration>>
VerbsRegistrar::RegisterDmabuf(const core::DmabufRange& range,
                               core::RemoteAccess remote) {
  const int access = MrAccessFlags(remote);
  RDMAD_ASSIGN_OR_RETURN(
      std::vector<std::unique_ptr<MemoryRegion>> regions,
      core::RegisterOnDmabufDevices<std::unique_ptr<MemoryRegion>>(
          dmabuf_, [&](size_t i) {
            return MemoryRegion::RegisterDmabuf(devices_[i], range, access);
          }));
  return std::unique_ptr<core::Registration>(
      std::make_unique<VerbsRegistration>(std::move(regions)));
}

}  // namespace rdmad::verbs
