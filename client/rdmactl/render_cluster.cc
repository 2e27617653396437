// How rdmactl shows the cluster directory: the directory line of `status`,
// `rdmactl ls` and `rdmactl lookup`, as text and as JSON (render.h).
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/rdmactl/format.h"
#include "client/rdmactl/render.h"

namespace rdmad::rdmactl {
namespace {

// "0x00c0ffee.../REVISION": which publication of a name an entry is.
std::string GenerationText(const ClusterRegion& r) {
  return absl::StrCat(IncarnationText(r.incarnation), "/", r.revision);
}

std::string Iso8601(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

Json ClusterRegionJson(const ClusterRegion& r) {
  Json out = Json::Object();
  out.Set("name", r.name)
      .Set("node", r.node)
      .Set("size", r.size)
      .Set("access", AccessName(r.access))
      .Set("region_id", r.region_id)
      .Set("incarnation", IncarnationText(r.incarnation))
      .Set("revision", r.revision)
      .Set("exported", Iso8601(r.exported));
  return out;
}

}  // namespace

std::string DirectoryText(const std::optional<DirectoryStatus>& directory) {
  if (!directory.has_value()) return "none";
  const DirectoryStatus& d = *directory;
  std::string text = absl::StrCat(d.url, " (prefix ", d.prefix,
                                  "): ", DirectoryStateName(d.state));
  if (d.state == DirectoryState::kConnected) {
    absl::StrAppend(&text, " via ", d.endpoint, ", lease 0x",
                    absl::Hex(static_cast<uint64_t>(d.lease_id)), " TTL ",
                    absl::ToInt64Seconds(d.lease_ttl), " s");
  }
  absl::StrAppend(&text, ", ", d.published_regions, " published, ",
                  d.cached_regions, " cached",
                  d.watch_live ? "" : " (watch down)", ", ", d.reconnects,
                  " reconnects");
  if (!d.last_error.empty()) absl::StrAppend(&text, "; ", d.last_error);
  for (const std::string& conflict : d.conflicts) {
    absl::StrAppend(&text, "; NOT LISTED, name taken: ", conflict);
  }
  return text;
}

std::string RenderClusterRegions(const ClusterRegionList& list,
                                 absl::Time now) {
  std::string out;
  if (list.regions.empty()) {
    out = "no exported regions in the cluster\n";
  } else {
    Table table({"NAME", "NODE", "SIZE", "ACCESS", "AGE", "GENERATION"});
    table.AlignRight(2);
    table.AlignRight(4);
    for (const ClusterRegion& r : list.regions) {
      const absl::Duration age =
          std::max(now - r.exported, absl::ZeroDuration());
      table.AddRow({r.name, r.node, HumanSize(r.size),
                    std::string(AccessName(r.access)), HumanDuration(age),
                    GenerationText(r)});
    }
    out = table.Render();
  }
  if (list.truncated) {
    absl::StrAppend(&out, "(more regions match: give a longer PREFIX)\n");
  }
  if (list.unreadable != 0) {
    absl::StrAppend(&out, "(", list.unreadable,
                    " unreadable entries skipped: not written by rdmad)\n");
  }
  return out;
}

std::string RenderLookup(const ClusterLookup& lookup) {
  const ClusterRegion& r = lookup.region;
  return RenderFields({
      {"name", r.name},
      {"node", r.node},
      {"size", HumanSize(r.size)},
      {"access", std::string(AccessName(r.access))},
      {"region id", absl::StrCat(r.region_id)},
      {"generation", GenerationText(r)},
      {"from", lookup.from_cache ? "cache" : "etcd"},
      {"latency",
       absl::StrCat(absl::ToInt64Microseconds(lookup.latency), " us")},
  });
}

Json DirectoryJson(const std::optional<DirectoryStatus>& directory) {
  if (!directory.has_value()) return Json();
  const DirectoryStatus& d = *directory;
  Json conflicts = Json::Array();
  for (const std::string& c : d.conflicts) conflicts.Push(c);
  Json out = Json::Object();
  out.Set("url", d.url)
      .Set("endpoint", d.endpoint)
      .Set("prefix", d.prefix)
      .Set("state", DirectoryStateName(d.state))
      .Set("last_error", d.last_error)
      .Set("state_since", Iso8601(d.state_since))
      // A lease id is an identifier, not a count (see json.h).
      .Set("lease",
           absl::StrCat("0x", absl::Hex(static_cast<uint64_t>(d.lease_id))))
      .Set("lease_ttl_s", absl::ToInt64Seconds(d.lease_ttl))
      .Set("published", d.published_regions)
      .Set("conflicts", std::move(conflicts))
      .Set("cached", d.cached_regions)
      .Set("watch_live", d.watch_live)
      .Set("revision", d.revision)
      .Set("reconnects", d.reconnects)
      .Set("lookups_cached", d.lookups_cached)
      .Set("lookups_etcd", d.lookups_store)
      .Set("lookups_failed", d.lookups_failed);
  return out;
}

Json ClusterRegionsJson(const ClusterRegionList& list, absl::Time now) {
  Json regions = Json::Array();
  for (const ClusterRegion& r : list.regions) {
    Json region = ClusterRegionJson(r);
    region.Set("age_ms", absl::ToInt64Milliseconds(
                             std::max(now - r.exported, absl::ZeroDuration())));
    regions.Push(std::move(region));
  }
  Json out = Json::Object();
  out.Set("regions", std::move(regions))
      .Set("revision", list.revision)
      .Set("truncated", list.truncated)
      .Set("unreadable", list.unreadable);
  return out;
}

Json LookupJson(const ClusterLookup& lookup) {
  Json out = ClusterRegionJson(lookup.region);
  out.Set("from", lookup.from_cache ? "cache" : "etcd")
      .Set("latency_us", absl::ToInt64Microseconds(lookup.latency));
  return out;
}

}  // namespace rdmad::rdmactl
