#include "client/rdmactl/render.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/rdmactl/format.h"

namespace rdmad::rdmactl {
namespace {

std::string Hex32(uint32_t value) {
  return absl::StrCat("0x", absl::Hex(value));
}

std::string OrDash(const std::string& text) {
  return text.empty() ? "-" : text;
}

std::string Str(absl::string_view text) { return std::string(text); }

std::string KeysText(const RegionInfo& region) {
  std::vector<std::string> keys;
  for (const DeviceKey& key : region.keys) {
    std::string text = absl::StrCat(key.device, ":lkey=", Hex32(key.lkey));
    if (key.rkey != 0) absl::StrAppend(&text, ",rkey=", Hex32(key.rkey));
    keys.push_back(std::move(text));
  }
  return keys.empty() ? "-" : absl::StrJoin(keys, " ");
}

std::string RenderPort(const PortInfo& port) {
  std::string out = absl::StrCat(
      "  port ", port.port, ": ", PortStateName(port.state), ", ",
      port.link_layer, ", MTU ", port.active_mtu, " (max ", port.max_mtu, ")");
  if (port.lid != 0) absl::StrAppend(&out, ", LID ", port.lid);
  absl::StrAppend(&out, ", max message ", HumanSize(port.max_msg_size), "\n");
  if (port.gids.empty()) {
    absl::StrAppend(&out, "    no GIDs\n");
    return out;
  }
  Table gids({"INDEX", "GID", "TYPE", "NETDEV"});
  gids.AlignRight(0);
  for (const GidInfo& gid : port.gids) {
    gids.AddRow({absl::StrCat(gid.index), gid.gid, OrDash(gid.type),
                 OrDash(gid.netdev)});
  }
  absl::StrAppend(&out, gids.Render("    "));
  return out;
}

std::string RenderLimits(const DeviceLimits& limits) {
  return RenderFields(
      {
          {"max MR size", HumanSize(limits.max_mr_size)},
          {"max QPs", absl::StrCat(limits.max_qp)},
          {"max QP WRs", absl::StrCat(limits.max_qp_wr)},
          {"max SGEs", absl::StrCat(limits.max_sge)},
          {"max CQs", absl::StrCat(limits.max_cq)},
          {"max CQEs", absl::StrCat(limits.max_cqe)},
          {"max MRs", absl::StrCat(limits.max_mr)},
          {"max PDs", absl::StrCat(limits.max_pd)},
          {"max QP RD atomic", absl::StrCat(limits.max_qp_rd_atom, " (init ",
                                            limits.max_qp_init_rd_atom, ")")},
      },
      "    ");
}

std::string PinnedCapText(const DaemonStatus& s) {
  std::string cap = s.max_pinned_bytes.has_value()
                        ? HumanSize(*s.max_pinned_bytes)
                        : std::string("none");
  if (!s.max_pinned_bytes_source.empty()) {
    absl::StrAppend(&cap, " (", s.max_pinned_bytes_source, ")");
  }
  return cap;
}

}  // namespace

std::string OwnerText(const RegionInfo& region) {
  if (region.owner == RegionOwner::kSession) {
    return absl::StrCat("session ", region.session_id);
  }
  return Str(RegionOwnerName(region.owner));
}

std::string ModeText(uint32_t mode) { return absl::StrFormat("%04o", mode); }

std::string IncarnationText(uint64_t incarnation) {
  return absl::StrCat("0x", absl::Hex(incarnation, absl::kZeroPad16));
}

// ---------------------------------------------------------------------------
// Text

// Which devices register dma-bufs, or what this daemon does without one.
std::string DmabufText(const DaemonStatus& s) {
  if (!s.dmabuf_devices.empty()) return absl::StrJoin(s.dmabuf_devices, ", ");
  if (s.device_count > 0) return "no device supports it (rdmactl devices)";
  return "over TCP, where rdmad can map it for the CPU";
}

std::string RenderStatus(const DaemonStatus& s) {
  std::string transport = Str(TransportName(s.transport));
  if (!s.transport_reason.empty()) {
    absl::StrAppend(&transport, " (", s.transport_reason, ")");
  }
  return RenderFields({
      {"version", s.version},
      {"incarnation", IncarnationText(s.incarnation)},
      {"pid", absl::StrCat(s.pid)},
      {"uptime", HumanDuration(s.uptime)},
      {"transport", transport},
      {"local socket", OrDash(s.local_socket)},
      {"peer address", OrDash(s.peer_address)},
      {"data listener", OrDash(s.data_listen)},
      {"metrics", s.metrics_url.empty() ? std::string("off")
                                        : s.metrics_url},
      {"config file", s.config_file.empty() ? std::string("none")
                                            : s.config_file},
      {"devices", absl::StrCat(s.device_count)},
      {"dma-buf", DmabufText(s)},
      {"regions",
       absl::StrCat(s.region_count, " (", HumanSize(s.region_bytes), ")")},
      {"sessions", absl::StrCat(s.session_count)},
      {"peers", absl::StrCat(s.peer_count)},
      {"memlock limit", s.memlock_limit.has_value()
                            ? HumanSize(*s.memlock_limit)
                            : std::string("unlimited")},
      {"max pinned bytes", PinnedCapText(s)},
      {"pinned bytes", HumanSize(s.pinned_bytes)},
      {"directory", DirectoryText(s.directory)},
  });
}

std::string RenderDevices(const DeviceList& devices) {
  if (devices.devices.empty()) {
    return absl::StrCat(devices.note.empty() ? "no RDMA devices" : devices.note,
                        "\n");
  }
  std::string out;
  for (const DeviceInfo& device : devices.devices) {
    if (!out.empty()) out += "\n";
    absl::StrAppend(&out, device.name, ": GUID ", OrDash(device.node_guid),
                    ", ", OrDash(device.transport), ", driver ",
                    OrDash(device.driver), "\n");
    absl::StrAppend(&out, "  dma-buf: ", device.dmabuf ? "yes" : "no",
                    device.dmabuf_probe.empty()
                        ? std::string()
                        : absl::StrCat(" (", device.dmabuf_probe, ")"),
                    "\n");
    if (device.notice_receives.has_value()) {
      const DeviceInfo::NoticeReceives& n = *device.notice_receives;
      absl::StrAppend(&out, "  notice receives (SRQ): ", n.posted, " of ",
                      n.depth, " posted, ", n.reposts, " reposted\n");
    }
    for (const PortInfo& port : device.ports) {
      absl::StrAppend(&out, RenderPort(port));
    }
    if (device.limits.has_value()) {
      absl::StrAppend(&out, "  limits:\n", RenderLimits(*device.limits));
    }
  }
  return out;
}

std::string RenderRegions(const std::vector<RegionInfo>& regions) {
  if (regions.empty()) return "no regions\n";
  Table table({"ID", "NAME", "SIZE", "OWNER", "UID", "GID", "MODE", "EXPORT",
               "BACKING", "KEYS"});
  for (size_t column : {0, 2, 4, 5}) table.AlignRight(column);
  for (const RegionInfo& r : regions) {
    // Session buffers are private to their session whatever the mode says.
    const std::string mode = r.owner == RegionOwner::kDaemon
                                 ? ModeText(r.mode)
                                 : std::string("session");
    table.AddRow({absl::StrCat(r.id), OrDash(r.name), HumanSize(r.size),
                  OwnerText(r), absl::StrCat(r.owner_uid),
                  absl::StrCat(r.owner_gid), mode, Str(AccessName(r.export_access)),
                  OrDash(r.backing), KeysText(r)});
  }
  return table.Render();
}

std::string RenderRemoteRegions(const std::string& peer,
                                const std::vector<RemoteRegionInfo>& regions) {
  if (regions.empty()) {
    return absl::StrCat("the daemon at ", peer,
                        " exports no regions to this node\n");
  }
  Table table({"NAME", "SIZE", "EXPORT"});
  table.AlignRight(1);
  for (const RemoteRegionInfo& r : regions) {
    table.AddRow({r.name, HumanSize(r.size), Str(AccessName(r.access))});
  }
  return table.Render();
}

std::string RenderStat(const RemoteRegionInfo& r, uint64_t offset) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"peer", r.peer.empty() ? std::string("this daemon") : r.peer},
      {"name", OrDash(r.name)},
      {"size", ByteCount(r.size)},
  };
  if (offset != 0 && offset <= r.size) {
    fields.push_back({"offset", absl::StrCat(ByteCount(offset), ", ",
                                             ByteCount(r.size - offset),
                                             " from there to the end")});
  }
  fields.push_back({"export", Str(AccessName(r.access))});
  return RenderFields(fields);
}

std::string RenderPeers(const std::vector<PeerInfo>& peers) {
  if (peers.empty()) return "no peers\n";
  Table table({"ADDRESS", "STATE", "TRANSPORT", "INCARNATION", "WRITTEN",
               "READ", "OPS", "FAILED", "REASON", "LAST ERROR"});
  for (size_t column : {4, 5, 6, 7}) table.AlignRight(column);
  for (const PeerInfo& p : peers) {
    table.AddRow({p.address, Str(PeerStateName(p.state)),
                  Str(TransportName(p.transport)),
                  IncarnationText(p.incarnation), HumanSize(p.bytes_written),
                  HumanSize(p.bytes_read), absl::StrCat(p.ops_completed),
                  absl::StrCat(p.ops_failed), OrDash(p.transport_reason),
                  OrDash(p.last_error)});
  }
  std::string out = table.Render();
  // The verbs channels' rails, one line each.
  Table rails({"PEER", "RAIL", "DEVICE", "REMOTE DEVICE", "STATE", "PORT",
               "BYTES", "OPS", "ERRORS", "PAUSES", "BANDWIDTH", "PAUSED FOR",
               "LAST ERROR"});
  for (size_t column : {1, 6, 7, 8, 9, 10}) rails.AlignRight(column);
  for (const PeerInfo& p : peers) {
    for (const RailInfo& r : p.rails) {
      rails.AddRow(
          {p.address, absl::StrCat(r.index),
           absl::StrCat(r.device, "/", r.port), OrDash(r.remote_device),
           Str(RailStateName(r.state)), r.port_active ? "ACTIVE" : "DOWN",
           HumanSize(r.bytes), absl::StrCat(r.ops), absl::StrCat(r.errors),
           absl::StrCat(r.pauses),
           r.bandwidth_bytes_per_second == 0
               ? "-"
               : absl::StrCat(HumanSize(r.bandwidth_bytes_per_second), "/s"),
           r.state == RailState::kPaused
               ? absl::FormatDuration(absl::Trunc(r.paused_left,
                                                  absl::Seconds(1)))
               : "-",
           OrDash(r.last_error)});
    }
  }
  if (!rails.empty()) absl::StrAppend(&out, "\nrails:\n", rails.Render());
  return out;
}

std::string RenderQps(const std::vector<QpInfo>& qps) {
  if (qps.empty()) return "no queue pairs or data connections\n";
  // ROLE: initiator (opened here to reach PEER) or responder (created here
  // to serve PEER's operations; the NIC serves them, its counters stay 0).
  Table verbs({"PEER", "ROLE", "TRANSPORT", "RAIL", "DEVICE", "LOCAL QPN",
               "REMOTE QPN", "STATE", "MTU", "POSTED", "POST CALLS",
               "COMPLETED", "ERRORS", "OUTSTANDING", "GENERATION"});
  for (size_t column : {3, 5, 6, 8, 9, 10, 11, 12, 13, 14}) {
    verbs.AlignRight(column);
  }
  Table tcp({"PEER", "ROLE", "TRANSPORT", "CONN", "LOCAL", "REMOTE", "STATE",
             "SENT", "SENDMSG CALLS", "COMPLETED", "ERRORS", "OUTSTANDING",
             "CONNECTS"});
  for (size_t column : {3, 7, 8, 9, 10, 11, 12}) tcp.AlignRight(column);
  for (const QpInfo& q : qps) {
    const std::string transport = Str(TransportName(q.transport));
    if (q.transport == Transport::kVerbs) {
      verbs.AddRow({q.peer, OrDash(q.role), transport, absl::StrCat(q.rail),
                    OrDash(q.device),
                    absl::StrCat(q.local_qpn), absl::StrCat(q.remote_qpn),
                    Str(QpStateName(q.state)), absl::StrCat(q.path_mtu),
                    absl::StrCat(q.posted), absl::StrCat(q.post_calls),
                    absl::StrCat(q.completed), absl::StrCat(q.errors),
                    absl::StrCat(q.outstanding), absl::StrCat(q.generation)});
    } else {
      tcp.AddRow({q.peer, OrDash(q.role), transport, absl::StrCat(q.connection),
                  OrDash(q.local_address), OrDash(q.remote_address),
                  Str(QpStateName(q.state)), absl::StrCat(q.posted),
                  absl::StrCat(q.post_calls), absl::StrCat(q.completed),
                  absl::StrCat(q.errors), absl::StrCat(q.outstanding),
                  absl::StrCat(q.generation)});
    }
  }
  std::string out;
  if (!verbs.empty()) absl::StrAppend(&out, "verbs queue pairs:\n", verbs.Render());
  if (!tcp.empty()) {
    if (!out.empty()) out += "\n";
    absl::StrAppend(&out, "TCP data connections:\n", tcp.Render());
  }
  return out;
}

// ---------------------------------------------------------------------------
// JSON

Json StatusJson(const DaemonStatus& s) {
  Json out = Json::Object();
  out.Set("version", s.version)
      .Set("incarnation", IncarnationText(s.incarnation))
      .Set("pid", s.pid)
      .Set("uptime_ms", absl::ToInt64Milliseconds(s.uptime))
      .Set("transport", TransportName(s.transport))
      .Set("transport_reason", s.transport_reason)
      .Set("local_socket", s.local_socket)
      .Set("peer_address", s.peer_address)
      .Set("data_listen", s.data_listen)
      .Set("metrics_url", s.metrics_url)
      .Set("config_file", s.config_file)
      .Set("devices", s.device_count)
      .Set("regions", s.region_count)
      .Set("region_bytes", s.region_bytes)
      .Set("sessions", s.session_count)
      .Set("peers", s.peer_count)
      .Set("memlock_limit", s.memlock_limit)
      .Set("max_pinned_bytes", s.max_pinned_bytes)
      .Set("max_pinned_bytes_source", s.max_pinned_bytes_source)
      .Set("pinned_bytes", s.pinned_bytes)
      .Set("directory", DirectoryJson(s.directory));
  Json dmabuf = Json::Array();
  for (const std::string& device : s.dmabuf_devices) dmabuf.Push(device);
  out.Set("dmabuf_devices", std::move(dmabuf));
  return out;
}

Json DevicesJson(const DeviceList& devices) {
  Json list = Json::Array();
  for (const DeviceInfo& d : devices.devices) {
    Json ports = Json::Array();
    for (const PortInfo& p : d.ports) {
      Json gids = Json::Array();
      for (const GidInfo& g : p.gids) {
        gids.Push(Json::Object()
                      .Set("index", g.index)
                      .Set("gid", g.gid)
                      .Set("type", g.type)
                      .Set("netdev", g.netdev));
      }
      ports.Push(Json::Object()
                     .Set("port", p.port)
                     .Set("state", PortStateName(p.state))
                     .Set("link_layer", p.link_layer)
                     .Set("mtu", p.active_mtu)
                     .Set("max_mtu", p.max_mtu)
                     .Set("lid", p.lid)
                     .Set("max_msg_size", p.max_msg_size)
                     .Set("gids", std::move(gids)));
    }
    Json limits;
    if (d.limits.has_value()) {
      const DeviceLimits& l = *d.limits;
      limits = Json::Object()
                   .Set("max_mr_size", l.max_mr_size)
                   .Set("max_qp", l.max_qp)
                   .Set("max_qp_wr", l.max_qp_wr)
                   .Set("max_sge", l.max_sge)
                   .Set("max_cq", l.max_cq)
                   .Set("max_cqe", l.max_cqe)
                   .Set("max_mr", l.max_mr)
                   .Set("max_pd", l.max_pd)
                   .Set("max_qp_rd_atom", l.max_qp_rd_atom)
                   .Set("max_qp_init_rd_atom", l.max_qp_init_rd_atom);
    }
    list.Push(Json::Object()
                  .Set("name", d.name)
                  .Set("node_guid", d.node_guid)
                  .Set("transport", d.transport)
                  .Set("driver", d.driver)
                  .Set("dmabuf", d.dmabuf)
                  .Set("dmabuf_probe", d.dmabuf_probe)
                  .Set("notice_receives",
                       d.notice_receives.has_value()
                           ? Json::Object()
                                 .Set("depth", d.notice_receives->depth)
                                 .Set("posted", d.notice_receives->posted)
                                 .Set("reposts", d.notice_receives->reposts)
                           : Json())
                  .Set("ports", std::move(ports))
                  .Set("limits", std::move(limits)));
  }
  Json out = Json::Object();
  out.Set("devices", std::move(list)).Set("note", devices.note);
  return out;
}

Json RegionJson(const RegionInfo& r) {
  Json keys = Json::Array();
  for (const DeviceKey& key : r.keys) {
    keys.Push(Json::Object()
                  .Set("device", key.device)
                  .Set("lkey", key.lkey)
                  .Set("rkey", key.rkey));
  }
  Json allow = Json::Array();
  for (const ExportGrant& g : r.export_allow) {
    allow.Push(g.uid.has_value() ? absl::StrCat(*g.uid, "@", g.peer) : g.peer);
  }
  Json out = Json::Object();
  out.Set("id", r.id)
      .Set("name", r.name)
      .Set("size", r.size)
      .Set("mapped_size", r.mapped_size)
      .Set("owner", RegionOwnerName(r.owner))
      .Set("session", r.owner == RegionOwner::kSession ? Json(r.session_id)
                                                       : Json())
      .Set("uid", r.owner_uid)
      .Set("gid", r.owner_gid)
      .Set("mode", ModeText(r.mode))
      .Set("export", AccessName(r.export_access))
      .Set("export_allow", std::move(allow))
      .Set("backing", r.backing)
      .Set("keys", std::move(keys))
      .Set("created", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", r.created,
                                       absl::UTCTimeZone()));
  return out;
}

Json RegionsJson(const std::vector<RegionInfo>& regions) {
  Json list = Json::Array();
  for (const RegionInfo& region : regions) list.Push(RegionJson(region));
  Json out = Json::Object();
  out.Set("regions", std::move(list));
  return out;
}

Json RemoteRegionJson(const RemoteRegionInfo& r) {
  Json out = Json::Object();
  out.Set("peer", r.peer)
      .Set("name", r.name)
      .Set("size", r.size)
      .Set("export", AccessName(r.access));
  return out;
}

Json StatJson(const RemoteRegionInfo& r, uint64_t offset) {
  Json out = RemoteRegionJson(r);
  out.Set("offset", offset).Set("bytes_from_offset",
                                offset <= r.size ? r.size - offset : 0);
  return out;
}

Json RemoteRegionsJson(const std::string& peer,
                       const std::vector<RemoteRegionInfo>& regions) {
  Json list = Json::Array();
  for (const RemoteRegionInfo& region : regions) {
    list.Push(RemoteRegionJson(region));
  }
  Json out = Json::Object();
  out.Set("peer", peer).Set("regions", std::move(list));
  return out;
}

Json RailsJson(const std::vector<RailInfo>& rails) {
  Json list = Json::Array();
  for (const RailInfo& r : rails) {
    list.Push(Json::Object()
                  .Set("rail", r.index)
                  .Set("device", r.device)
                  .Set("port", r.port)
                  .Set("remote_device", r.remote_device)
                  .Set("state", RailStateName(r.state))
                  .Set("port_active", r.port_active)
                  .Set("bytes", r.bytes)
                  .Set("ops", r.ops)
                  .Set("errors", r.errors)
                  .Set("pauses", r.pauses)
                  .Set("outstanding", r.outstanding_bytes)
                  .Set("bandwidth", r.bandwidth_bytes_per_second)
                  .Set("paused_ms", absl::ToInt64Milliseconds(r.paused_left))
                  .Set("numa_node", r.numa_node)
                  .Set("last_error", r.last_error));
  }
  return list;
}

Json PeersJson(const std::vector<PeerInfo>& peers) {
  Json list = Json::Array();
  for (const PeerInfo& p : peers) {
    list.Push(Json::Object()
                  .Set("address", p.address)
                  .Set("state", PeerStateName(p.state))
                  .Set("transport", TransportName(p.transport))
                  .Set("incarnation", IncarnationText(p.incarnation))
                  .Set("written", p.bytes_written)
                  .Set("read", p.bytes_read)
                  .Set("ops", p.ops_completed)
                  .Set("failed", p.ops_failed)
                  .Set("reason", p.transport_reason)
                  .Set("last_error", p.last_error)
                  .Set("rails", RailsJson(p.rails)));
  }
  Json out = Json::Object();
  out.Set("peers", std::move(list));
  return out;
}

Json QpsJson(const std::vector<QpInfo>& qps) {
  Json list = Json::Array();
  for (const QpInfo& q : qps) {
    Json qp = Json::Object();
    qp.Set("peer", q.peer)
        .Set("role", q.role)
        .Set("transport", TransportName(q.transport));
    if (q.transport == Transport::kVerbs) {
      qp.Set("rail", q.rail)
          .Set("device", q.device)
          .Set("local_qpn", q.local_qpn)
          .Set("remote_qpn", q.remote_qpn)
          .Set("state", QpStateName(q.state))
          .Set("mtu", q.path_mtu)
          .Set("posted", q.posted)
          .Set("post_calls", q.post_calls)
          .Set("completed", q.completed)
          .Set("errors", q.errors)
          .Set("outstanding", q.outstanding)
          .Set("generation", q.generation);
    } else {
      qp.Set("conn", q.connection)
          .Set("local", q.local_address)
          .Set("remote", q.remote_address)
          .Set("state", QpStateName(q.state))
          .Set("sent", q.posted)
          .Set("sendmsg_calls", q.post_calls)
          .Set("completed", q.completed)
          .Set("errors", q.errors)
          .Set("outstanding", q.outstanding)
          .Set("connects", q.generation);
    }
    list.Push(std::move(qp));
  }
  Json out = Json::Object();
  out.Set("qps", std::move(list));
  return out;
}

}  // namespace rdmad::rdmactl
