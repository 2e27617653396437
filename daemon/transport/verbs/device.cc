#include "daemon/transport/verbs/device.h"

#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "daemon/transport/verbs/dmabuf_probe.h"
#include "spdlog/spdlog.h"

namespace rdmad::verbs {
namespace {

// Returns the device list and sets `count`. A kernel without RDMA support
// (ENOSYS) is a node without devices, not an error: the handle is then null
// and `count` 0.
absl::StatusOr<DeviceListHandle> GetDeviceList(int& count) {
  count = 0;
  DeviceListHandle list(ibv_get_device_list(&count));
  if (list == nullptr) {
    const int error = errno;
    count = 0;
    if (error == ENOSYS) return list;
    return absl::ErrnoToStatus(
        error,
        "ibv_get_device_list: cannot list RDMA devices (check access to "
        "/sys/class/infiniband and /dev/infiniband)");
  }
  return list;
}

absl::StatusOr<ContextHandle> OpenContext(ibv_device* device) {
  ContextHandle context(ibv_open_device(device));
  if (context == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("ibv_open_device(", ibv_get_device_name(device),
                            "): run rdmad as a user that can open "
                            "/dev/infiniband/uverbs*"));
  }
  return context;
}

absl::StatusOr<ibv_device_attr> QueryDeviceAttributes(ibv_context* context) {
  ibv_device_attr attr{};
  if (int rc = ibv_query_device(context, &attr); rc != 0) {
    return absl::ErrnoToStatus(
        rc, absl::StrCat("ibv_query_device(",
                         ibv_get_device_name(context->device), ")"));
  }
  return attr;
}

absl::StatusOr<ibv_port_attr> QueryPortAttributes(ibv_context* context,
                                                  uint32_t port) {
  ibv_port_attr attr{};
  if (int rc = ibv_query_port(context, static_cast<uint8_t>(port), &attr);
      rc != 0) {
    return absl::ErrnoToStatus(
        rc,
        absl::StrCat("ibv_query_port(", ibv_get_device_name(context->device),
                     ", port ", port, ")"));
  }
  return attr;
}

core::DeviceLimits LimitsFrom(const ibv_device_attr& attr) {
  core::DeviceLimits limits;
  limits.max_mr_size = attr.max_mr_size;
  limits.max_qp = static_cast<uint32_t>(attr.max_qp);
  limits.max_qp_wr = static_cast<uint32_t>(attr.max_qp_wr);
  limits.max_sge = static_cast<uint32_t>(attr.max_sge);
  limits.max_cq = static_cast<uint32_t>(attr.max_cq);
  limits.max_cqe = static_cast<uint32_t>(attr.max_cqe);
  limits.max_mr = static_cast<uint32_t>(attr.max_mr);
  limits.max_pd = static_cast<uint32_t>(attr.max_pd);
  limits.max_qp_rd_atom = static_cast<uint32_t>(attr.max_qp_rd_atom);
  limits.max_qp_init_rd_atom = static_cast<uint32_t>(attr.max_qp_init_rd_atom);
  return limits;
}

// Network device name for an interface index (an ioctl, no sysfs read);
// empty if there is none or it vanished meanwhile.
std::string NetdevName(uint32_t ifindex,
                       std::map<uint32_t, std::string>& cache) {
  if (ifindex == 0) return "";
  auto it = cache.find(ifindex);
  if (it != cache.end()) return it->second;
  char name[IF_NAMESIZE] = {};
  std::string result = if_indextoname(ifindex, name) != nullptr ? name : "";
  cache.emplace(ifindex, result);
  return result;
}

// Reads every valid GID of every port in one call and files them by port.
absl::Status FillGids(ibv_context* context, std::vector<core::PortInfo>& ports,
                      size_t table_capacity) {
  if (table_capacity == 0) return absl::OkStatus();
  std::vector<ibv_gid_entry> entries(table_capacity);
  const ssize_t n =
      ibv_query_gid_table(context, entries.data(), entries.size(), 0);
  if (n < 0) {
    return absl::ErrnoToStatus(
        static_cast<int>(-n),
        absl::StrCat("ibv_query_gid_table(",
                     ibv_get_device_name(context->device), ")"));
  }
  std::map<uint32_t, std::string> netdev_cache;
  for (ssize_t i = 0; i < n; ++i) {
    const ibv_gid_entry& entry = entries[i];
    if (entry.port_num == 0 || entry.port_num > ports.size()) continue;
    core::GidInfo gid;
    gid.index = entry.gid_index;
    gid.raw = GidFromIbv(entry.gid);
    // The table holds only valid entries, but a zero GID is never usable.
    if (IsZeroGid(gid.raw)) continue;
    gid.text = GidToText(gid.raw);
    gid.type = std::string(GidTypeName(entry.gid_type));
    gid.netdev = NetdevName(entry.ndev_ifindex, netdev_cache);
    ports[entry.port_num - 1].gids.push_back(std::move(gid));
  }
  for (core::PortInfo& port : ports) {
    std::sort(port.gids.begin(), port.gids.end(),
              [](const core::GidInfo& a, const core::GidInfo& b) {
                return a.index < b.index;
              });
  }
  return absl::OkStatus();
}

absl::StatusOr<core::DeviceInfo> DescribeContext(ibv_context* context,
                                                 const ibv_device_attr& attr) {
  core::DeviceInfo info;
  info.name = ibv_get_device_name(context->device);
  info.node_guid = GuidToText(ibv_get_device_guid(context->device));
  info.transport = TransportName(context->device->transport_type);
  info.driver = DeviceDriver(info.name);
  // Soft-iWARP devices also sit on a network device.
  if (info.driver == "rxe" &&
      context->device->transport_type == IBV_TRANSPORT_IWARP) {
    info.driver = "siw";
  }
  info.limits = LimitsFrom(attr);

  size_t gid_capacity = 0;
  for (uint32_t port = 1; port <= attr.phys_port_cnt; ++port) {
    RDMAD_ASSIGN_OR_RETURN(ibv_port_attr port_attr,
                           QueryPortAttributes(context, port));
    core::PortInfo p;
    p.port = port;
    p.state = PortStateFromIbv(port_attr.state);
    p.link_layer = LinkLayerName(port_attr.link_layer);
    p.active_mtu = MtuToBytes(port_attr.active_mtu);
    p.max_mtu = MtuToBytes(port_attr.max_mtu);
    p.lid = port_attr.lid;
    p.max_msg_size = port_attr.max_msg_sz;
    gid_capacity += static_cast<size_t>(std::max(port_attr.gid_tbl_len, 0));
    info.ports.push_back(std::move(p));
  }
  RDMAD_RETURN_IF_ERROR(FillGids(context, info.ports, gid_capacity));
  return info;
}

}  // namespace

absl::StatusOr<std::vector<core::DeviceInfo>> DiscoverDevices() {
  // The ibv_device pointers are valid while the list is held.
  int count = 0;
  RDMAD_ASSIGN_OR_RETURN(DeviceListHandle list, GetDeviceList(count));
  std::vector<core::DeviceInfo> devices;
  absl::Status first_error;
  for (int i = 0; i < count; ++i) {
    ibv_device* device = list.get()[i];
    absl::StatusOr<core::DeviceInfo> info =
        [&]() -> absl::StatusOr<core::DeviceInfo> {
      RDMAD_ASSIGN_OR_RETURN(ContextHandle context, OpenContext(device));
      RDMAD_ASSIGN_OR_RETURN(ibv_device_attr attr,
                             QueryDeviceAttributes(context.get()));
      return DescribeContext(context.get(), attr);
    }();
    if (!info.ok()) {
      spdlog::warn("skipping RDMA device {}: {}", ibv_get_device_name(device),
                   info.status().ToString());
      if (first_error.ok()) first_error = info.status();
      continue;
    }
    devices.push_back(*std::move(info));
  }
  if (devices.empty() && !first_error.ok()) return first_error;
  return devices;
}

Device::Device(std::string name, ContextHandle context, PdHandle pd,
               const ibv_device_attr& attributes)
    : name_(std::move(name)),
      context_(std::move(context)),
      pd_(std::move(pd)),
      attributes_(attributes) {}

absl::StatusOr<std::shared_ptr<Device>> Device::Open(absl::string_view name) {
  int count = 0;
  RDMAD_ASSIGN_OR_RETURN(DeviceListHandle list, GetDeviceList(count));
  std::vector<std::string> present;
  ibv_device* found = nullptr;
  for (int i = 0; i < count; ++i) {
    const char* device_name = ibv_get_device_name(list.get()[i]);
    if (name == device_name) found = list.get()[i];
    present.emplace_back(device_name);
  }
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no RDMA device named \"", name, "\"; devices present: ",
                     present.empty() ? "none" : absl::StrJoin(present, ", "),
                     ". List them with `ibv_devices` or `rdma link`"));
  }
  RDMAD_ASSIGN_OR_RETURN(ContextHandle context, OpenContext(found));
  RDMAD_ASSIGN_OR_RETURN(ibv_device_attr attr,
                         QueryDeviceAttributes(context.get()));
  PdHandle pd(ibv_alloc_pd(context.get()));
  if (pd == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("ibv_alloc_pd(", name,
                            "): the device may be out of PDs (max_pd ",
                            attr.max_pd, ")"));
  }
  // The constructor is private, so std::make_shared cannot reach it.
  return std::shared_ptr<Device>(
      new Device(std::string(name), std::move(context), std::move(pd), attr));
}

absl::StatusOr<ibv_port_attr> Device::QueryPort(uint32_t port) const {
  if (port == 0 || port > attributes_.phys_port_cnt) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ", name_, " has ports 1..",
        static_cast<int>(attributes_.phys_port_cnt), ", not ", port));
  }
  return QueryPortAttributes(context_.get(), port);
}

absl::StatusOr<ibv_gid_entry> Device::QueryGid(uint32_t port,
                                               uint32_t index) const {
  ibv_gid_entry entry{};
  if (int rc = ibv_query_gid_ex(context_.get(), port, index, &entry, 0);
      rc != 0) {
    if (rc == ENODATA) {
      return absl::NotFoundError(absl::StrCat(
          "GID index ", index, " of ", name_, " port ", port,
          " is empty: choose a valid index (see `rdmactl devices`)"));
    }
    return absl::ErrnoToStatus(
        rc, absl::StrCat("ibv_query_gid_ex(", name_, ", port ", port,
                         ", index ", index, ")"));
  }
  return entry;
}

absl::StatusOr<core::DeviceInfo> Device::Describe() const {
  return DescribeContext(context_.get(), attributes_);
}

absl::StatusOr<std::shared_ptr<Device>> OpenDevice(absl::string_view name) {
  return Device::Open(name);
}

}  // namespace rdmad::verbs
