#include "daemon/core/memory_registrar.h"

namespace rdmad::core {
namespace {

class NullRegistration final : public Registration {
 public:
  const std::vector<DeviceRegistration>& keys() const override { return keys_; }

 private:
  std::vector<DeviceRegistration> keys_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Registration>> MemoryRegistrar::RegisterDmabuf(
    const DmabufRange& /*range*/, RemoteAccess /*remote*/) {
  return absl::FailedPreconditionError(
      "this daemon's memory registrar cannot register dma-bufs");
}

absl::StatusOr<std::unique_ptr<Registration>> NullRegistrar::Register(
    void* /*addr*/, size_t /*length*/, RemoteAccess /*remote*/) {
  return std::make_unique<NullRegistration>();
}

absl::StatusOr<std::unique_ptr<Registration>> NullRegistrar::RegisterDmabuf(
    const DmabufRange& /*range*/, RemoteAccess /*remote*/) {
  return std::make_unique<NullRegistration>();
}

}  // namespace rdmad::core
