// The seam between the region table and whatever registers memory with the
// hardware. The verbs transport implements it with one ibv_reg_mr per device;
// TCP-only daemons use a registrar with no devices. The core never sees ibv_*.
#ifndef RDMAD_DAEMON_CORE_MEMORY_REGISTRAR_H_
#define RDMAD_DAEMON_CORE_MEMORY_REGISTRAR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/core/dmabuf_policy.h"

namespace rdmad::core {

// Remote access a registration grants. Local write is always granted.
enum class RemoteAccess : uint32_t {
  kNone = 0,
  kRead = 1,
  kWrite = 2,
  kReadWrite = 3,
};

inline bool Allows(RemoteAccess granted, RemoteAccess wanted) {
  return (static_cast<uint32_t>(granted) & static_cast<uint32_t>(wanted)) ==
         static_cast<uint32_t>(wanted);
}

// Keys of one memory registration on one device.
struct DeviceRegistration {
  std::string device;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

// Owns the registrations of one memory range on every device. Destroying it
// deregisters them (ibv_dereg_mr), which revokes their rkeys.
class Registration {
 public:
  virtual ~Registration() = default;
  virtual const std::vector<DeviceRegistration>& keys() const = 0;
};

// Registers memory ranges. Implementations are thread-safe.
class MemoryRegistrar {
 public:
  virtual ~MemoryRegistrar() = default;

  // Registers [addr, addr+length) on every device with local write access
  // plus `remote`. The memory must stay mapped until the result is destroyed.
  virtual absl::StatusOr<std::unique_ptr<Registration>> Register(
      void* addr, size_t length, RemoteAccess remote) = 0;

  // What each device's dma-buf probe said, in device order (see
  // dmabuf_policy.h); fixed after construction. Empty without devices.
  virtual std::vector<DmabufCapability> DmabufCapabilities() const {
    return {};
  }

  // Registers a dma-buf range on every device that supports dma-buf, with
  // local write access plus `remote`; all or nothing. The descriptor must
  // stay open until the result is destroyed. This default, for registrars
  // that know no dma-buf, refuses with FAILED_PRECONDITION.
  virtual absl::StatusOr<std::unique_ptr<Registration>> RegisterDmabuf(
      const DmabufRange& range, RemoteAccess remote);
};

// A registrar for nodes without RDMA devices: registrations carry no keys.
class NullRegistrar final : public MemoryRegistrar {
 public:
  absl::StatusOr<std::unique_ptr<Registration>> Register(
      void* addr, size_t length, RemoteAccess remote) override;
  // No device to register on: the TCP transport serves the dma-buf through
  // the daemon's CPU mapping of it.
  absl::StatusOr<std::unique_ptr<Registration>> RegisterDmabuf(
      const DmabufRange& range, RemoteAccess remote) override;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_MEMORY_REGISTRAR_H_
