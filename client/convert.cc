#include "client/convert.h"

#include <utility>

namespace rdmad::client_internal {

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

v1::Access ToProto(Access access) {
  switch (access) {
    case Access::kRead:
      return v1::ACCESS_READ;
    case Access::kWrite:
      return v1::ACCESS_WRITE;
    case Access::kReadWrite:
      return v1::ACCESS_READ_WRITE;
    case Access::kNone:
      break;
  }
  return v1::ACCESS_NONE;
}

Access FromProto(v1::Access access) {
  switch (access) {
    case v1::ACCESS_READ:
      return Access::kRead;
    case v1::ACCESS_WRITE:
      return Access::kWrite;
    case v1::ACCESS_READ_WRITE:
      return Access::kReadWrite;
    default:
      return Access::kNone;
  }
}

Transport FromProto(v1::TransportKind kind) {
  switch (kind) {
    case v1::TRANSPORT_VERBS:
      return Transport::kVerbs;
    case v1::TRANSPORT_TCP:
      return Transport::kTcp;
    default:
      return Transport::kNone;
  }
}

v1::RemoteRegion ToProto(const RemoteRegion& remote) {
  v1::RemoteRegion out;
  out.set_peer(remote.peer);
  if (!remote.descriptor.empty()) {
    out.set_encoded_descriptor(remote.descriptor);
  } else {
    out.set_name(remote.name);
  }
  return out;
}

DaemonStatus FromProto(const v1::GetStatusResponse& s) {
  DaemonStatus out;
  out.version = s.version();
  out.incarnation = s.incarnation();
  out.transport = FromProto(s.transport());
  out.transport_reason = s.transport_reason();
  out.local_socket = s.local_socket();
  out.peer_address = s.peer_listen();
  out.data_listen = s.data_listen();
  out.metrics_url = s.metrics_url();
  out.config_file = s.config_file();
  out.device_count = s.device_count();
  out.region_count = s.region_count();
  out.region_bytes = s.region_bytes();
  out.session_count = s.session_count();
  out.peer_count = s.peer_count();
  out.uptime = absl::Milliseconds(s.uptime_ms());
  out.pid = s.pid();
  if (s.memlock_limit() != 0) out.memlock_limit = s.memlock_limit();
  if (s.max_pinned_bytes() != 0) out.max_pinned_bytes = s.max_pinned_bytes();
  out.max_pinned_bytes_source = s.max_pinned_bytes_source();
  out.pinned_bytes = s.pinned_bytes();
  if (s.has_directory()) out.directory = FromProto(s.directory());
  out.dmabuf_devices.assign(s.dmabuf_devices().begin(),
                            s.dmabuf_devices().end());
  return out;
}

DeviceList FromProto(const v1::ListDevicesResponse& devices) {
  DeviceList out;
  out.note = devices.note();
  for (const v1::DeviceInfo& d : devices.devices()) {
    DeviceInfo device;
    device.name = d.name();
    device.node_guid = d.node_guid();
    device.transport = d.transport();
    device.driver = d.driver();
    device.dmabuf = d.dmabuf();
    device.dmabuf_probe = d.dmabuf_probe();
    if (d.has_notice_receives()) {
      device.notice_receives = DeviceInfo::NoticeReceives{
          .depth = d.notice_receives().depth(),
          .posted = d.notice_receives().posted(),
          .reposts = d.notice_receives().reposts()};
    }
    for (const v1::PortInfo& p : d.ports()) {
      PortInfo port;
      port.port = p.port();
      port.state = StateNamed(p.state(), PortStateName);
      port.link_layer = p.link_layer();
      port.active_mtu = p.active_mtu();
      port.max_mtu = p.max_mtu();
      port.lid = p.lid();
      port.max_msg_size = p.max_msg_size();
      for (const v1::GidEntry& g : p.gids()) {
        port.gids.push_back({g.index(), g.gid(), g.type(), g.netdev()});
      }
      device.ports.push_back(std::move(port));
    }
    if (d.has_limits()) {
      const v1::DeviceLimits& l = d.limits();
      device.limits = DeviceLimits{l.max_mr_size(),    l.max_qp(),
                                   l.max_qp_wr(),      l.max_sge(),
                                   l.max_cq(),         l.max_cqe(),
                                   l.max_mr(),         l.max_pd(),
                                   l.max_qp_rd_atom(), l.max_qp_init_rd_atom()};
    }
    out.devices.push_back(std::move(device));
  }
  return out;
}

RegionInfo FromProto(const v1::RegionInfo& r) {
  RegionInfo out;
  out.id = r.id();
  out.name = r.name();
  out.size = r.size();
  out.mapped_size = r.mapped_size();
  switch (r.owner()) {
    case v1::REGION_OWNER_SESSION:
      out.owner = RegionOwner::kSession;
      break;
    case v1::REGION_OWNER_DAEMON:
      out.owner = RegionOwner::kDaemon;
      break;
    default:
      out.owner = RegionOwner::kUnspecified;
  }
  out.session_id = r.session_id();
  out.owner_uid = r.owner_uid();
  out.owner_gid = r.owner_gid();
  out.mode = r.mode();
  out.export_access = FromProto(r.export_access());
  for (const v1::ExportGrant& grant : r.export_allow()) {
    ExportGrant g;
    g.peer = grant.peer();
    if (grant.has_uid()) g.uid = grant.uid();
    out.export_allow.push_back(std::move(g));
  }
  for (const v1::DeviceKey& key : r.keys()) {
    out.keys.push_back({key.device(), key.lkey(), key.rkey()});
  }
  out.backing = r.backing();
  out.created = absl::FromUnixMillis(r.create_time_unix_ms());
  return out;
}

PeerInfo FromProto(const v1::PeerInfo& p) {
  PeerInfo out;
  out.address = p.address();
  out.incarnation = p.incarnation();
  out.transport = FromProto(p.transport());
  out.transport_reason = p.transport_reason();
  out.state = StateNamed(p.state(), PeerStateName);
  out.last_error = p.last_error();
  out.bytes_written = p.bytes_written();
  out.bytes_read = p.bytes_read();
  out.ops_completed = p.ops_completed();
  out.ops_failed = p.ops_failed();
  for (const v1::RailInfo& r : p.rails()) {
    RailInfo rail;
    rail.index = r.index();
    rail.device = r.device();
    rail.port = r.port();
    rail.remote_device = r.remote_device();
    rail.state = StateNamed(r.state(), RailStateName);
    rail.port_active = r.port_active();
    rail.bytes = r.bytes();
    rail.ops = r.ops();
    rail.errors = r.errors();
    rail.pauses = r.pauses();
    rail.outstanding_bytes = r.outstanding_bytes();
    rail.bandwidth_bytes_per_second = r.bandwidth_bytes_per_second();
    rail.paused_left = absl::Milliseconds(r.paused_ms_left());
    rail.numa_node = r.numa_node();
    rail.last_error = r.last_error();
    out.rails.push_back(std::move(rail));
  }
  return out;
}

QpInfo FromProto(const v1::QpInfo& q) {
  QpInfo out;
  out.peer = q.peer();
  out.transport = FromProto(q.transport());
  if (out.transport == Transport::kNone) {
    // A daemon from before QpInfo.transport: only verbs QPs name a device.
    out.transport = q.device().empty() ? Transport::kTcp : Transport::kVerbs;
  }
  out.role = q.role();
  out.state = StateNamed(q.state(), QpStateName);
  out.posted = q.posted();
  out.completed = q.completed();
  out.errors = q.errors();
  out.outstanding = q.outstanding();
  out.generation = q.generation();
  out.post_calls = q.post_calls();
  if (out.transport == Transport::kVerbs) {
    out.device = q.device();
    out.local_qpn = q.local_qpn();
    out.remote_qpn = q.remote_qpn();
    out.path_mtu = q.path_mtu();
    out.rail = q.rail();
  } else {
    out.connection = q.local_qpn();  // TCP: the connection's index
    out.local_address = q.local_address();
    out.remote_address = q.remote_address();
  }
  return out;
}

QueueInfo FromProto(const v1::QueueInfo& q) {
  QueueInfo out;
  out.id = q.queue_id();
  out.session_id = q.session_id();
  out.pid = q.pid();
  out.uid = q.uid();
  out.submission_entries = q.submission_entries();
  out.completion_entries = q.completion_entries();
  out.notifications = q.notifications();
  out.engine = q.engine();
  out.opened = absl::FromUnixMillis(q.opened_unix_ms());
  out.in_flight = q.in_flight();
  out.submitted = q.submitted();
  out.completed = q.completed();
  out.failed = q.failed();
  out.notified = q.notified();
  out.client_wakeups = q.client_wakeups();
  out.doorbells = q.doorbells();
  out.notifications_held = q.notifications_held();
  out.notifications_lost = q.notifications_lost();
  if (q.stopped()) {
    // A code this library does not know (or OK, which a stop never is)
    // still says the queue stopped.
    const int code = q.stop_code();
    out.stop_reason = absl::Status(
        code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated)
            ? static_cast<absl::StatusCode>(code)
            : absl::StatusCode::kUnknown,
        q.stop_message().empty() ? "stopped" : q.stop_message());
  }
  return out;
}

RemoteRegionInfo FromProto(const std::string& peer,
                           const v1::ExportedRegion& region) {
  return RemoteRegionInfo{peer, region.name(), region.length(),
                          FromProto(region.access())};
}

DirectoryStatus FromProto(const v1::DirectoryStatus& d) {
  DirectoryStatus out;
  out.url = d.url();
  out.endpoint = d.endpoint();
  out.prefix = d.prefix();
  out.state = StateNamed(d.state(), DirectoryStateName);
  out.last_error = d.last_error();
  out.state_since = absl::FromUnixMillis(d.state_since_unix_ms());
  out.lease_id = d.lease_id();
  out.lease_ttl = absl::Seconds(d.lease_ttl_seconds());
  out.published_regions = d.published_regions();
  out.conflicts.assign(d.conflicts().begin(), d.conflicts().end());
  out.cached_regions = d.cached_regions();
  out.watch_live = d.watch_live();
  out.revision = d.revision();
  out.reconnects = d.reconnects();
  out.lookups_cached = d.lookups_cached();
  out.lookups_store = d.lookups_store();
  out.lookups_failed = d.lookups_failed();
  return out;
}

ClusterRegion FromProto(const v1::ClusterRegion& r) {
  ClusterRegion out;
  out.name = r.name();
  out.node = r.node();
  out.size = r.size();
  out.access = FromProto(r.access());
  out.region_id = r.region_id();
  out.incarnation = r.incarnation();
  out.revision = r.revision();
  out.exported = absl::FromUnixMillis(r.exported_unix_ms());
  return out;
}

ClusterRegionList FromProto(const v1::ListClusterRegionsResponse& list) {
  ClusterRegionList out;
  for (const v1::ClusterRegion& region : list.regions()) {
    out.regions.push_back(FromProto(region));
  }
  out.revision = list.revision();
  out.truncated = list.truncated();
  out.unreadable = list.unreadable();
  return out;
}

ClusterLookup FromProto(const v1::LookupRegionResponse& lookup) {
  ClusterLookup out;
  out.region = FromProto(lookup.region());
  out.from_cache = lookup.from_cache();
  out.latency = absl::Nanoseconds(lookup.latency_ns());
  return out;
}

}  // namespace rdmad::client_internal
