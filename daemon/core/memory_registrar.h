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
};

// A registrar for nodes without RDMA devices: registrations carry no keys.
class NullRegistrar final : public MemoryRegistrar {
 public:
  absl::StatusOr<std::unique_ptr<Registration>> Register(
      void* addr, size_t length, RemoteAccess remote) override;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_MEMORY_REGISTRAR_H_
