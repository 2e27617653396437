// RDMA device discovery and the owner of an opened device.
//
// DiscoverDevices() answers "what RDMA hardware does this node have" in the
// plain core::DeviceInfo form the rest of the daemon uses. Device owns one
// opened ibv_context and the protection domain (PD) that every MR, CQ and QP
// of rdmad on that device belongs to.
//
// Lifetime: Device is handed out as std::shared_ptr. Every object created on
// it (MemoryRegion, CompletionQueue, QueuePair) keeps a shared_ptr to its
// Device, so the PD and the context are released only after the last child,
// whatever order the owners are destroyed in.
//
// Example:
//   RDMAD_ASSIGN_OR_RETURN(std::vector<core::DeviceInfo> devices,
//                          DiscoverDevices());
//   for (const core::DeviceInfo& info : devices) {
//     RDMAD_ASSIGN_OR_RETURN(std::shared_ptr<Device> device,
//                            OpenDevice(info.name));
//     ...
//   }
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_DEVICE_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_DEVICE_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/device_info.h"
#include "daemon/transport/verbs/conversions.h"
#include "daemon/transport/verbs/handles.h"

namespace rdmad::verbs {

// Lists every RDMA device with its ports, valid GIDs and limits. Opens each
// device briefly; GIDs come from one ibv_query_gid_table call per device (an
// ioctl), never from reading sysfs entry by entry.
//
// A node without devices (or a kernel without RDMA support) yields OK and an
// empty vector: that is a normal configuration, served by the TCP transport.
// A device that cannot be opened or queried is skipped with a warning; if no
// device at all could be described, the first such error is returned.
//
// Thread-safety: thread-safe.
absl::StatusOr<std::vector<core::DeviceInfo>> DiscoverDevices();

// One opened RDMA device and its protection domain.
//
// Thread-safety: immutable after Open; all methods are const and may be
// called from any thread (libibverbs calls on one context are thread-safe).
class Device {
 public:
  // Opens the device called `name` (e.g. "rxe0", "mlx5_0") and allocates a
  // PD on it. NotFound (listing the devices present) if there is no such
  // device.
  static absl::StatusOr<std::shared_ptr<Device>> Open(absl::string_view name);

  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device() = default;

  const std::string& name() const { return name_; }

  // The verbs context. Not owned by the caller; valid while this Device
  // lives.
  ibv_context* context() const { return context_.get(); }

  // The PD all of rdmad's objects on this device use. Not owned by the
  // caller; valid while this Device lives.
  ibv_pd* pd() const { return pd_.get(); }

  // ibv_query_device result, read once at Open.
  const ibv_device_attr& attributes() const { return attributes_; }

  // Current attributes of port `port` (1-based); state and MTU can change
  // while the daemon runs, so this queries the device every time.
  absl::StatusOr<ibv_port_attr> QueryPort(uint32_t port) const;

  // The GID at `index` of `port` with its type (ibv_query_gid_ex).
  absl::StatusOr<ibv_gid_entry> QueryGid(uint32_t port, uint32_t index) const;

  // Fresh description of this device, as DiscoverDevices reports it.
  absl::StatusOr<core::DeviceInfo> Describe() const;

 private:
  Device(std::string name, ContextHandle context, PdHandle pd,
         const ibv_device_attr& attributes);

  std::string name_;
  // Parent first: members are destroyed in reverse, so the PD goes before
  // the context it belongs to.
  ContextHandle context_;
  PdHandle pd_;
  ibv_device_attr attributes_;
};

// Same as Device::Open; the owner of the context and its PD.
absl::StatusOr<std::shared_ptr<Device>> OpenDevice(absl::string_view name);

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_DEVICE_H_
