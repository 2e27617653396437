#include "daemon/service/proto_convert.h"

#include "absl/strings/str_cat.h"
#include "common/region_address.h"

namespace rdmad::service {

core::RemoteAccess FromProto(v1::Access access) {
  switch (access) {
    case v1::ACCESS_READ:
      return core::RemoteAccess::kRead;
    case v1::ACCESS_WRITE:
      return core::RemoteAccess::kWrite;
    case v1::ACCESS_READ_WRITE:
      return core::RemoteAccess::kReadWrite;
    default:
      return core::RemoteAccess::kNone;
  }
}

v1::Access ToProto(core::RemoteAccess access) {
  switch (access) {
    case core::RemoteAccess::kRead:
      return v1::ACCESS_READ;
    case core::RemoteAccess::kWrite:
      return v1::ACCESS_WRITE;
    case core::RemoteAccess::kReadWrite:
      return v1::ACCESS_READ_WRITE;
    case core::RemoteAccess::kNone:
      break;
  }
  return v1::ACCESS_NONE;
}

absl::StatusOr<core::RemoteAccess> AccessFromProto(int access,
                                                   absl::string_view field) {
  if (!v1::Access_IsValid(access)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": unknown access value ", access,
        ": use ACCESS_NONE, ACCESS_READ, ACCESS_WRITE or ACCESS_READ_WRITE"));
  }
  return FromProto(static_cast<v1::Access>(access));
}

absl::StatusOr<std::shared_ptr<const core::ExportAccessList>> FromProto(
    const google::protobuf::RepeatedPtrField<v1::ExportGrant>& grants) {
  if (grants.empty()) return nullptr;
  std::vector<core::ExportGrant> entries;
  for (const v1::ExportGrant& grant : grants) {
    core::ExportGrant entry;
    entry.peer = grant.peer();
    if (grant.has_uid()) entry.uid = grant.uid();
    entries.push_back(std::move(entry));
  }
  auto list = core::ExportAccessList::Parse(entries);
  if (!list.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("allow: ", list.status().message()));
  }
  return std::make_shared<const core::ExportAccessList>(*std::move(list));
}

absl::StatusOr<core::RegionKey> FromProto(const v1::RegionRef& ref) {
  switch (ref.ref_case()) {
    case v1::RegionRef::kId:
      if (ref.id() == 0) break;
      return core::RegionKey{ref.id(), ""};
    case v1::RegionRef::kName:
      if (absl::Status s = ValidateRegionName(ref.name()); !s.ok()) return s;
      return core::RegionKey{0, ref.name()};
    case v1::RegionRef::REF_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "no region given: set RegionRef.id (non-zero) or RegionRef.name");
}

void ToProto(const core::RegionSnapshot& region, bool show_keys,
             v1::RegionInfo* out) {
  out->set_id(region.id);
  out->set_name(region.name);
  out->set_size(region.size);
  out->set_mapped_size(region.mapped_size);
  out->set_owner(region.owner == core::RegionOwnerKind::kDaemon
                     ? v1::REGION_OWNER_DAEMON
                     : v1::REGION_OWNER_SESSION);
  out->set_session_id(region.session_id);
  out->set_owner_uid(region.owner_uid);
  out->set_owner_gid(region.owner_gid);
  out->set_mode(region.mode);
  out->set_export_access(ToProto(region.exported.access));
  if (region.exported.allow != nullptr) {
    for (const core::ExportGrant& grant : region.exported.allow->grants()) {
      v1::ExportGrant* g = out->add_export_allow();
      g->set_peer(grant.peer);
      if (grant.uid.has_value()) g->set_uid(*grant.uid);
    }
  }
  out->set_backing(region.backing);
  out->set_create_time_unix_ms(absl::ToUnixMillis(region.created));
  for (const auto& local : region.local_keys) {
    v1::DeviceKey* key = out->add_keys();
    key->set_device(local.device);
    key->set_lkey(local.lkey);
    if (!show_keys) continue;
    for (const auto& exported : region.exported.keys) {
      if (exported.device == local.device) key->set_rkey(exported.rkey);
    }
  }
}

void ToProto(const core::DeviceInfo& device, v1::DeviceInfo* out) {
  out->set_name(device.name);
  out->set_node_guid(device.node_guid);
  out->set_transport(device.transport);
  out->set_driver(device.driver);
  out->set_dmabuf(device.dmabuf);
  out->set_dmabuf_probe(device.dmabuf_probe);
  for (const auto& port : device.ports) {
    v1::PortInfo* p = out->add_ports();
    p->set_port(port.port);
    p->set_state(std::string(core::PortStateName(port.state)));
    p->set_link_layer(port.link_layer);
    p->set_active_mtu(port.active_mtu);
    p->set_max_mtu(port.max_mtu);
    p->set_lid(port.lid);
    p->set_max_msg_size(port.max_msg_size);
    for (const auto& gid : port.gids) {
      v1::GidEntry* g = p->add_gids();
      g->set_index(gid.index);
      g->set_gid(gid.text);
      g->set_type(gid.type);
      g->set_netdev(gid.netdev);
    }
  }
  v1::DeviceLimits* l = out->mutable_limits();
  l->set_max_mr_size(device.limits.max_mr_size);
  l->set_max_qp(device.limits.max_qp);
  l->set_max_qp_wr(device.limits.max_qp_wr);
  l->set_max_sge(device.limits.max_sge);
  l->set_max_cq(device.limits.max_cq);
  l->set_max_cqe(device.limits.max_cqe);
  l->set_max_mr(device.limits.max_mr);
  l->set_max_pd(device.limits.max_pd);
  l->set_max_qp_rd_atom(device.limits.max_qp_rd_atom);
  l->set_max_qp_init_rd_atom(device.limits.max_qp_init_rd_atom);
}

void ToDescriptor(const DaemonIdentity& identity,
                  const core::RegionSnapshot& region,
                  v1::RegionDescriptor* out) {
  out->set_peer(identity.peer_listen);
  out->set_incarnation(identity.incarnation);
  out->set_region_id(region.id);
  out->set_name(region.name);
  out->set_length(region.size);
  out->set_access(ToProto(region.exported.access));
  out->set_addr(region.addr);
  for (const auto& key : region.exported.keys) {
    v1::DeviceKey* k = out->add_keys();
    k->set_device(key.device);
    k->set_rkey(key.rkey);
  }
  out->set_tcp_key(region.exported.tcp_key);
}

}  // namespace rdmad::service
