// rdmactl alloc, free, export, chmod, chgrp, descriptor: daemon-owned named
// regions.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/rdmactl/commands.h"
#include "client/rdmactl/format.h"
#include "client/rdmactl/render.h"

namespace rdmad::rdmactl {

absl::Status RunAlloc(CommandContext& context) {
  const Invocation& inv = context.invocation();
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto region = (*client)->CreateRegion(inv.name, inv.size, inv.access,
                                        inv.region_options);
  if (!region.ok()) {
    return Failed(absl::StrCat("alloc ", inv.name), region.status());
  }
  return context.Answer(
      RegionJson(*region),
      absl::StrCat("allocated region '", region->name, "' (id ", region->id,
                   "): ", HumanSize(region->size), ", export ",
                   AccessName(region->export_access), ", mode ",
                   ModeText(region->mode), " group ", region->owner_gid,
                   "\n"));
}

absl::Status RunFree(CommandContext& context) {
  const Invocation& inv = context.invocation();
  auto client = context.client();
  if (!client.ok()) return client.status();
  if (absl::Status s = (*client)->FreeRegion(inv.name); !s.ok()) {
    return Failed(absl::StrCat("free ", inv.name), s);
  }
  Json json = Json::Object();
  json.Set("freed", inv.name);
  return context.Answer(json,
                        absl::StrCat("freed region '", inv.name, "'\n"));
}

absl::Status RunExport(CommandContext& context) {
  const Invocation& inv = context.invocation();
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto region = (*client)->Export(inv.name, inv.access, inv.allow);
  if (!region.ok()) {
    return Failed(absl::StrCat("export ", inv.name), region.status());
  }
  std::string to = "any peer";
  if (!region->export_allow.empty()) {
    std::vector<std::string> grants;
    for (const ExportGrant& g : region->export_allow) {
      grants.push_back(g.uid.has_value() ? absl::StrCat(*g.uid, "@", g.peer)
                                         : g.peer);
    }
    to = absl::StrJoin(grants, ", ");
  }
  return context.Answer(
      RegionJson(*region),
      region->export_access == Access::kNone
          ? absl::StrCat("region '", inv.name, "' is local-only now\n")
          : absl::StrCat("region '", inv.name, "' exported ",
                         AccessName(region->export_access), " to ", to,
                         "\n"));
}

absl::Status RunChmod(CommandContext& context) {
  const Invocation& inv = context.invocation();
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto region = (*client)->SetRegionPermissions(inv.name, inv.mode,
                                                std::nullopt);
  if (!region.ok()) {
    return Failed(absl::StrCat("chmod ", inv.name), region.status());
  }
  return context.Answer(RegionJson(*region),
                        absl::StrCat("region '", inv.name, "': mode ",
                                     ModeText(region->mode), "\n"));
}

absl::Status RunChgrp(CommandContext& context) {
  const Invocation& inv = context.invocation();
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto region = (*client)->SetRegionPermissions(inv.name, std::nullopt,
                                                inv.group);
  if (!region.ok()) {
    return Failed(absl::StrCat("chgrp ", inv.name), region.status());
  }
  return context.Answer(RegionJson(*region),
                        absl::StrCat("region '", inv.name, "': group ",
                                     region->owner_gid, "\n"));
}

absl::Status RunDescriptor(CommandContext& context) {
  const Invocation& inv = context.invocation();
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto descriptor = (*client)->GetDescriptor(inv.name);
  if (!descriptor.ok()) {
    return Failed(absl::StrCat("descriptor ", inv.name), descriptor.status());
  }
  Json json = Json::Object();
  json.Set("name", inv.name).Set("descriptor", *descriptor);
  return context.Answer(json, absl::StrCat(*descriptor, "\n"));
}

}  // namespace rdmad::rdmactl
