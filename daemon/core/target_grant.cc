#include "daemon/core/target_grant.h"

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/core/access_control.h"

namespace rdmad::core {
namespace {

RemoteAccess AccessOf(bool read, bool write) {
  if (read && write) return RemoteAccess::kReadWrite;
  if (read) return RemoteAccess::kRead;
  if (write) return RemoteAccess::kWrite;
  return RemoteAccess::kNone;
}

absl::string_view AccessWords(RemoteAccess access) {
  switch (access) {
    case RemoteAccess::kNone:
      return "nothing";
    case RemoteAccess::kRead:
      return "reading only";
    case RemoteAccess::kWrite:
      return "writing only";
    case RemoteAccess::kReadWrite:
      return "reading and writing";
  }
  return "nothing";
}

// A descriptor this daemon issued: what both its export and the caller's
// own permissions allow.
absl::StatusOr<TargetGrant> GrantSelfExport(const Caller& caller,
                                            const TransferTarget& target,
                                            const RegionTable& regions) {
  auto region = regions.FindExportedById(target.self_region_id);
  if (!region.ok()) return region.status();
  const RemoteAccess exported = (*region)->exported().access;
  // The key must be the current export's; the use ends at once, as each
  // operation begins its own.
  auto use = (*region)->BeginExportUse(target.self_key, exported);
  if (!use.ok()) return use.status();
  const RemoteAccess local = LocalAccessOf(caller, **region);
  const bool read = Allows(local, RemoteAccess::kRead) &&
                    Allows(exported, RemoteAccess::kRead);
  const bool write = Allows(local, RemoteAccess::kWrite) &&
                     Allows(exported, RemoteAccess::kWrite);
  const std::string label = absl::StrCat("region #", (*region)->id());
  if (!read && !write) {
    RDMAD_RETURN_IF_ERROR(
        CheckLocalAccess(caller, (*region)->acl(), kLocalRead, label));
    // The caller may read it, but the export allows only writing.
    return absl::PermissionDeniedError(absl::StrCat(
        label, ": its export allows ", AccessWords(exported),
        " and your permissions allow ", AccessWords(local),
        ": nothing is allowed by both; ask its owner to export it for "
        "reading"));
  }
  return TargetGrant{.route = TargetRoute::kSelfExport,
                     .size = (*region)->size(),
                     .access = AccessOf(read, write),
                     .transport = TransportKind::kLocal};
}

// A name: the region of this daemon that has it, as its local user may
// reach it, else the cluster directory's.
absl::StatusOr<TargetGrant> GrantLocalName(const Caller& caller,
                                           const TransferTarget& target,
                                           const RegionTable& regions,
                                           TargetReach reach) {
  auto region = regions.FindForUse(caller, RegionKey{0, target.name}, 0);
  if (absl::IsNotFound(region.status()) && reach.directory) {
    return TargetGrant{.route = TargetRoute::kDirectory};
  }
  if (!region.ok()) return region.status();
  const RemoteAccess access = LocalAccessOf(caller, **region);
  if (access == RemoteAccess::kNone) {
    RDMAD_RETURN_IF_ERROR(CheckLocalAccess(
        caller, (*region)->acl(), kLocalRead,
        absl::StrCat("region '", target.name, "'")));
  }
  return TargetGrant{.route = TargetRoute::kLocalName,
                     .size = (*region)->size(),
                     .access = access,
                     .transport = TransportKind::kLocal};
}

}  // namespace

absl::string_view TargetRouteName(TargetRoute route) {
  switch (route) {
    case TargetRoute::kSelfExport:
      return "self export";
    case TargetRoute::kLocalName:
      return "local name";
    case TargetRoute::kDirectory:
      return "directory";
    case TargetRoute::kPeer:
      return "peer";
  }
  return "unknown";
}

absl::StatusOr<TargetGrant> GrantTarget(const Caller& caller,
                                        const TransferTarget& target,
                                        const RegionTable& regions,
                                        TargetReach reach) {
  if (target.self_region_id != 0) {
    return GrantSelfExport(caller, target, regions);
  }
  if (target.is_local()) return GrantLocalName(caller, target, regions, reach);
  if (!reach.peers) {
    return absl::FailedPreconditionError(
        "this daemon has no data transport to peers");
  }
  return TargetGrant{.route = TargetRoute::kPeer};
}

RemoteAccess LocalAccessOf(const Caller& caller, const Region& region) {
  const bool read =
      CheckLocalAccess(caller, region.acl(), kLocalRead, "").ok();
  const bool write =
      CheckLocalAccess(caller, region.acl(), kLocalWrite, "").ok();
  return AccessOf(read, write);
}

}  // namespace rdmad::core
