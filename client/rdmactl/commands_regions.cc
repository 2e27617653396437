// rdmactl alloc, free, export, descriptor: daemon-owned named regions.
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
  if (context.global().json) return context.PrintJson(*region);
  return context.Print(absl::StrCat(
      "allocated region '", region->name(), "' (id ", region->id(), "): ",
      HumanSize(region->size()), ", export ",
      AccessText(region->export_access()), ", mode ",
      absl::StrFormat("%04o", region->mode()), " group ", region->owner_gid(),
      "\n"));
}

absl::Status RunFree(CommandContext& context) {
  const Invocation& inv = context.invocation();
  auto client = context.client();
  if (!client.ok()) return client.status();
  if (absl::Status s = (*client)->FreeRegion(inv.name); !s.ok()) {
    return Failed(absl::StrCat("free ", inv.name), s);
  }
  return context.Print(absl::StrCat("freed region '", inv.name, "'\n"));
}

absl::Status RunExport(CommandContext& context) {
  const Invocation& inv = context.invocation();
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto region = (*client)->Export(inv.name, inv.access, inv.allow);
  if (!region.ok()) {
    return Failed(absl::StrCat("export ", inv.name), region.status());
  }
  if (context.global().json) return context.PrintJson(*region);
  if (region->export_access() == v1::ACCESS_NONE) {
    return context.Print(
        absl::StrCat("region '", inv.name, "' is local-only now\n"));
  }
  std::string to = "any peer";
  if (region->export_allow_size() > 0) {
    std::vector<std::string> grants;
    for (const v1::ExportGrant& g : region->export_allow()) {
      grants.push_back(g.has_uid() ? absl::StrCat(g.uid(), "@", g.peer())
                                   : g.peer());
    }
    to = absl::StrJoin(grants, ", ");
  }
  return context.Print(absl::StrCat("region '", inv.name, "' exported ",
                                    AccessText(region->export_access()), " to ",
                                    to, "\n"));
}

absl::Status RunDescriptor(CommandContext& context) {
  const Invocation& inv = context.invocation();
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto descriptor = (*client)->GetDescriptor(inv.name);
  if (!descriptor.ok()) {
    return Failed(absl::StrCat("descriptor ", inv.name), descriptor.status());
  }
  return context.Print(absl::StrCat(*descriptor, "\n"));
}

}  // namespace rdmad::rdmactl
