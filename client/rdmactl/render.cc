#include "client/rdmactl/render.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/rdmactl/format.h"
#include "google/protobuf/util/json_util.h"

namespace rdmad::rdmactl {
namespace {

std::string Hex(uint64_t value) {
  return absl::StrCat("0x", absl::Hex(value, absl::kZeroPad16));
}

std::string Hex32(uint32_t value) {
  return absl::StrCat("0x", absl::Hex(value));
}

std::string OrDash(const std::string& text) {
  return text.empty() ? "-" : text;
}

std::string KeysText(const v1::RegionInfo& region) {
  std::vector<std::string> keys;
  for (const v1::DeviceKey& key : region.keys()) {
    std::string text =
        absl::StrCat(key.device(), ":lkey=", Hex32(key.lkey()));
    if (key.rkey() != 0) absl::StrAppend(&text, ",rkey=", Hex32(key.rkey()));
    keys.push_back(std::move(text));
  }
  return keys.empty() ? "-" : absl::StrJoin(keys, " ");
}

std::string RenderPort(const v1::PortInfo& port) {
  std::string out = absl::StrCat(
      "  port ", port.port(), ": ", port.state(), ", ", port.link_layer(),
      ", MTU ", port.active_mtu(), " (max ", port.max_mtu(), ")");
  if (port.lid() != 0) absl::StrAppend(&out, ", LID ", port.lid());
  absl::StrAppend(&out, ", max message ", HumanSize(port.max_msg_size()),
                  "\n");
  if (port.gids().empty()) {
    absl::StrAppend(&out, "    no GIDs\n");
    return out;
  }
  Table gids({"INDEX", "GID", "TYPE", "NETDEV"});
  gids.AlignRight(0);
  for (const v1::GidEntry& gid : port.gids()) {
    gids.AddRow({absl::StrCat(gid.index()), gid.gid(), OrDash(gid.type()),
                 OrDash(gid.netdev())});
  }
  absl::StrAppend(&out, gids.Render("    "));
  return out;
}

std::string RenderLimits(const v1::DeviceLimits& limits) {
  return RenderFields(
      {
          {"max MR size", HumanSize(limits.max_mr_size())},
          {"max QPs", absl::StrCat(limits.max_qp())},
          {"max QP WRs", absl::StrCat(limits.max_qp_wr())},
          {"max SGEs", absl::StrCat(limits.max_sge())},
          {"max CQs", absl::StrCat(limits.max_cq())},
          {"max CQEs", absl::StrCat(limits.max_cqe())},
          {"max MRs", absl::StrCat(limits.max_mr())},
          {"max PDs", absl::StrCat(limits.max_pd())},
          {"max QP RD atomic", absl::StrCat(limits.max_qp_rd_atom(), " (init ",
                                            limits.max_qp_init_rd_atom(), ")")},
      },
      "    ");
}

}  // namespace

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;  // zeros and empty lists too
  options.preserve_proto_field_names = true;
  std::string json;
  const auto status =
      google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat(
        "cannot print the answer as JSON: ", status.ToString()));
  }
  if (json.empty() || json.back() != '\n') json += '\n';
  return json;
}

std::string TransportName(v1::TransportKind transport) {
  switch (transport) {
    case v1::TRANSPORT_VERBS:
      return "verbs";
    case v1::TRANSPORT_TCP:
      return "tcp";
    default:
      return "unspecified";
  }
}

std::string AccessText(v1::Access access) {
  switch (access) {
    case v1::ACCESS_READ:
      return "r";
    case v1::ACCESS_WRITE:
      return "w";
    case v1::ACCESS_READ_WRITE:
      return "rw";
    default:
      return "none";
  }
}

std::string OwnerText(const v1::RegionInfo& region) {
  switch (region.owner()) {
    case v1::REGION_OWNER_SESSION:
      return absl::StrCat("session ", region.session_id());
    case v1::REGION_OWNER_DAEMON:
      return "daemon";
    default:
      return "?";
  }
}

namespace {

// One line on the cluster directory for `rdmactl status`.
std::string DirectoryText(const v1::GetStatusResponse& s) {
  if (!s.has_directory()) return "none";
  const v1::DirectoryStatus& d = s.directory();
  std::string text = absl::StrCat(d.url(), " (prefix ", d.prefix(), "): ",
                                   d.state());
  if (d.state() == "connected") {
    absl::StrAppend(&text, " via ", d.endpoint(), ", lease ",
                    Hex(static_cast<uint64_t>(d.lease_id())), " TTL ",
                    d.lease_ttl_seconds(), " s");
  }
  absl::StrAppend(&text, ", ", d.published_regions(), " published, ",
                  d.cached_regions(), " cached",
                  d.watch_live() ? "" : " (watch down)", ", ", d.reconnects(),
                  " reconnects");
  if (!d.last_error().empty()) absl::StrAppend(&text, "; ", d.last_error());
  for (const std::string& conflict : d.conflicts()) {
    absl::StrAppend(&text, "; NOT LISTED, name taken: ", conflict);
  }
  return text;
}

}  // namespace

std::string RenderClusterRegions(const v1::ListClusterRegionsResponse& list,
                                 absl::Time now) {
  std::string out;
  if (list.regions().empty()) {
    out = "no exported regions in the cluster\n";
  } else {
    Table table({"NAME", "NODE", "SIZE", "ACCESS", "AGE", "GENERATION"});
    table.AlignRight(2);
    table.AlignRight(4);
    for (const v1::ClusterRegion& r : list.regions()) {
      const absl::Duration age =
          now - absl::FromUnixMillis(r.exported_unix_ms());
      table.AddRow({r.name(), r.node(), HumanSize(r.size()),
                    AccessText(r.access()),
                    HumanDuration(std::max(age, absl::ZeroDuration())),
                    absl::StrCat(Hex(r.incarnation()), "/", r.revision())});
    }
    out = table.Render();
  }
  if (list.truncated()) {
    absl::StrAppend(&out, "(more regions match: give a longer PREFIX)\n");
  }
  if (list.unreadable() != 0) {
    absl::StrAppend(&out, "(", list.unreadable(),
                    " unreadable entries skipped: not written by rdmad)\n");
  }
  return out;
}

std::string RenderLookup(const v1::LookupRegionResponse& lookup) {
  const v1::ClusterRegion& r = lookup.region();
  return RenderFields({
      {"name", r.name()},
      {"node", r.node()},
      {"size", HumanSize(r.size())},
      {"access", AccessText(r.access())},
      {"region id", absl::StrCat(r.region_id())},
      {"generation", absl::StrCat(Hex(r.incarnation()), "/", r.revision())},
      {"from", lookup.from_cache() ? "cache" : "etcd"},
      {"latency", absl::StrCat(lookup.latency_ns() / 1000, " us")},
  });
}

std::string RenderStatus(const v1::GetStatusResponse& s) {
  std::string transport = TransportName(s.transport());
  if (!s.transport_reason().empty()) {
    absl::StrAppend(&transport, " (", s.transport_reason(), ")");
  }
  return RenderFields({
      {"version", s.version()},
      {"incarnation", Hex(s.incarnation())},
      {"pid", absl::StrCat(s.pid())},
      {"uptime", HumanDuration(absl::Milliseconds(s.uptime_ms()))},
      {"transport", transport},
      {"local socket", OrDash(s.local_socket())},
      {"peer address", OrDash(s.peer_listen())},
      {"devices", absl::StrCat(s.device_count())},
      {"regions", absl::StrCat(s.region_count(), " (",
                               HumanSize(s.region_bytes()), ")")},
      {"sessions", absl::StrCat(s.session_count())},
      {"peers", absl::StrCat(s.peer_count())},
      {"memlock limit", s.memlock_limit() == 0
                            ? std::string("unlimited")
                            : HumanSize(s.memlock_limit())},
      {"directory", DirectoryText(s)},
  });
}

std::string RenderDevices(const v1::ListDevicesResponse& devices) {
  if (devices.devices().empty()) {
    return absl::StrCat(devices.note().empty() ? "no RDMA devices"
                                               : devices.note(),
                        "\n");
  }
  std::string out;
  for (const v1::DeviceInfo& device : devices.devices()) {
    if (!out.empty()) out += "\n";
    absl::StrAppend(&out, device.name(), ": GUID ", OrDash(device.node_guid()),
                    ", ", OrDash(device.transport()), "\n");
    for (const v1::PortInfo& port : device.ports()) {
      absl::StrAppend(&out, RenderPort(port));
    }
    if (device.has_limits()) {
      absl::StrAppend(&out, "  limits:\n", RenderLimits(device.limits()));
    }
  }
  return out;
}

std::string RenderRegions(const v1::ListRegionsResponse& regions) {
  if (regions.regions().empty()) return "no regions\n";
  Table table({"ID", "NAME", "SIZE", "OWNER", "UID", "GID", "MODE", "EXPORT",
               "BACKING", "KEYS"});
  table.AlignRight(0);
  table.AlignRight(2);
  table.AlignRight(4);
  table.AlignRight(5);
  for (const v1::RegionInfo& r : regions.regions()) {
    // Session buffers are private to their session whatever the mode says.
    const std::string mode =
        r.owner() == v1::REGION_OWNER_DAEMON
            ? absl::StrFormat("%04o", r.mode())
            : std::string("session");
    table.AddRow({absl::StrCat(r.id()), OrDash(r.name()), HumanSize(r.size()),
                  OwnerText(r), absl::StrCat(r.owner_uid()),
                  absl::StrCat(r.owner_gid()), mode,
                  AccessText(r.export_access()), OrDash(r.backing()),
                  KeysText(r)});
  }
  return table.Render();
}

std::string RenderPeers(const v1::ListPeersResponse& peers) {
  if (peers.peers().empty()) return "no peers\n";
  Table table({"ADDRESS", "STATE", "TRANSPORT", "INCARNATION", "WRITTEN",
               "READ", "OPS", "FAILED", "REASON", "LAST ERROR"});
  for (size_t column : {4, 5, 6, 7}) table.AlignRight(column);
  for (const v1::PeerInfo& p : peers.peers()) {
    table.AddRow({p.address(), OrDash(p.state()), TransportName(p.transport()),
                  Hex(p.incarnation()), HumanSize(p.bytes_written()),
                  HumanSize(p.bytes_read()), absl::StrCat(p.ops_completed()),
                  absl::StrCat(p.ops_failed()), OrDash(p.transport_reason()),
                  OrDash(p.last_error())});
  }
  return table.Render();
}

std::string RenderQps(const v1::ListQpsResponse& qps) {
  if (qps.qps().empty()) return "no queue pairs\n";
  Table table({"PEER", "DEVICE", "LOCAL QPN", "REMOTE QPN", "STATE", "MTU",
               "POSTED", "POST CALLS", "COMPLETED", "ERRORS", "OUTSTANDING",
               "GENERATION"});
  for (size_t column : {2, 3, 5, 6, 7, 8, 9, 10, 11}) table.AlignRight(column);
  for (const v1::QpInfo& q : qps.qps()) {
    table.AddRow({q.peer(), OrDash(q.device()), absl::StrCat(q.local_qpn()),
                  absl::StrCat(q.remote_qpn()), OrDash(q.state()),
                  absl::StrCat(q.path_mtu()), absl::StrCat(q.posted()),
                  q.device().empty() ? std::string("-")
                                     : absl::StrCat(q.post_calls()),
                  absl::StrCat(q.completed()), absl::StrCat(q.errors()),
                  absl::StrCat(q.outstanding()), absl::StrCat(q.generation())});
  }
  return table.Render();
}

}  // namespace rdmad::rdmactl
