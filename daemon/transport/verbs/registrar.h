// Memory registration with ibv_reg_mr on every opened device.
//
// VerbsRegistrar implements core::MemoryRegistrar: the region table asks it
// to register a buffer and gets back a core::Registration that carries one
// (lkey, rkey) pair per device and deregisters them all when destroyed,
// which revokes the rkeys a peer may still hold.
//
// Example:
//   RDMAD_ASSIGN_OR_RETURN(std::shared_ptr<Device> device, OpenDevice("rxe0"));
//   VerbsRegistrar registrar({device});
//   RDMAD_ASSIGN_OR_RETURN(
//       std::unique_ptr<core::Registration> reg,
//       registrar.Register(buf, len, core::RemoteAccess::kRead));
//   uint32_t rkey = reg->keys()[0].rkey;  // hand this to the peer
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_REGISTRAR_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_REGISTRAR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/handles.h"

namespace rdmad::verbs {

// One ibv_mr on one device. Keeps the Device (and so the PD the MR belongs
// to) alive until the MR is deregistered.
//
// Thread-safety: immutable after Register; thread-safe.
class MemoryRegion {
 public:
  // Registers [addr, addr+length) in `device`'s PD with ibv_reg_mr
  // `access` flags (see MrAccessFlags). The memory must stay mapped until
  // the MemoryRegion is destroyed. InvalidArgument for a null or empty
  // range.
  static absl::StatusOr<std::unique_ptr<MemoryRegion>> Register(
      std::shared_ptr<Device> device, void* addr, size_t length, int access);

  // Registers a dma-buf range with ibv_reg_dmabuf_mr: the device reaches
  // `range.length` bytes from `range.offset` of the dma-buf `range.fd` at
  // addresses from `range.iova`. The descriptor must stay open until the
  // MemoryRegion is destroyed.
  static absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterDmabuf(
      std::shared_ptr<Device> device, const core::DmabufRange& range,
      int access);

  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  const Device& device() const { return *device_; }
  // The MR. Not owned by the caller; valid while this object lives.
  ibv_mr* mr() const { return mr_.get(); }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  void* addr() const { return mr_->addr; }
  size_t length() const { return mr_->length; }

 private:
  MemoryRegion(std::shared_ptr<Device> device, MrHandle mr);

  std::shared_ptr<Device> device_;  // parent first
  MrHandle mr_;
};

// The registrations of one memory range on every device of a VerbsRegistrar.
// Destroying it deregisters all of them.
//
// Thread-safety: immutable after creation; thread-safe.
class VerbsRegistration final : public core::Registration {
 public:
  explicit VerbsRegistration(std::vector<std::unique_ptr<MemoryRegion>> mrs);

  const std::vector<core::DeviceRegistration>& keys() const override {
    return keys_;
  }

  // The MRs, in the registrar's device order. Not owned by the caller.
  const std::vector<std::unique_ptr<MemoryRegion>>& regions() const {
    return regions_;
  }

  // The MR on the device called `device`, or nullptr. Not owned.
  const MemoryRegion* RegionOn(absl::string_view device) const;

 private:
  std::vector<std::unique_ptr<MemoryRegion>> regions_;
  std::vector<core::DeviceRegistration> keys_;
};

// Registers memory on a fixed set of opened devices (one PD per device).
//
// Thread-safety: thread-safe. The device list is fixed at construction and
// ibv_reg_mr/ibv_dereg_mr may be called concurrently on one PD, so no lock
// is needed.
class VerbsRegistrar final : public core::MemoryRegistrar {
 public:
  // `devices` must not contain nulls. An empty list registers nothing and
  // returns registrations without keys, like core::NullRegistrar. Probes
  // each device for dma-buf support (dmabuf_probe.h).
  explicit VerbsRegistrar(std::vector<std::shared_ptr<Device>> devices);

  // Opens every device DiscoverDevices reports (none on a node without
  // RDMA), each with its own PD.
  static absl::StatusOr<std::unique_ptr<VerbsRegistrar>> OpenAll();

  // Registers [addr, addr+length) on every device with local write access
  // plus `remote` (IBV_ACCESS_REMOTE_READ/WRITE). All or nothing: if one
  // device fails, the MRs already made are deregistered and the error names
  // that device. The memory must stay mapped until the result is destroyed.
  absl::StatusOr<std::unique_ptr<core::Registration>> Register(
      void* addr, size_t length, core::RemoteAccess remote) override;

  // Same as Register, with the concrete type so the verbs transport can get
  // at the MRs.
  absl::StatusOr<std::unique_ptr<VerbsRegistration>> RegisterVerbs(
      void* addr, size_t length, core::RemoteAccess remote);

  std::vector<core::DmabufCapability> DmabufCapabilities() const override {
    return dmabuf_;
  }

  // Registers a dma-buf on every device whose probe said it can
  // (core::RegisterOnDmabufDevices: all or nothing). The caller checked
  // core::CheckDmabufServable; with no such device it registers nothing.
  absl::StatusOr<std::unique_ptr<core::Registration>> RegisterDmabuf(
      const core::DmabufRange& range, core::RemoteAccess remote) override;

  const std::vector<std::shared_ptr<Device>>& devices() const {
    return devices_;
  }

 private:
  const std::vector<std::shared_ptr<Device>> devices_;
  // One per device, in the same order.
  const std::vector<core::DmabufCapability> dmabuf_;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_REGISTRAR_H_
