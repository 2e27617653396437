// RegionTable: who may use a region, changed by its owner — remote access
// (Export) and local permissions (SetPermissions, like chmod/chgrp; one
// that takes rights away also re-keys the export). For a kept region the
// keeper's record changes first, so that the next daemon gives the region
// the rights in force now.
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/secure_random.h"
#include "common/status_macros.h"
#include "daemon/core/access_control.h"
#include "daemon/core/region_table.h"

namespace rdmad::core {

absl::StatusOr<std::shared_ptr<Region>> RegionTable::Export(
    const Caller& caller, const RegionKey& key, RemoteAccess access,
    std::shared_ptr<const ExportAccessList> allow) {
  std::shared_ptr<Region> region;
  {
    absl::ReaderMutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(region, FindLocked(key));
    RDMAD_RETURN_IF_ERROR(CheckManage(caller, *region, key));
  }
  if (access == RemoteAccess::kNone) {
    if (allow != nullptr && !allow->empty()) {
      return absl::InvalidArgumentError(
          "an access list was given with no access to grant: revoking (none) "
          "takes no list");
    }
    absl::MutexLock export_lock(&export_mu_);
    if (KeptRegion* kept = region->kept()) {
      RDMAD_RETURN_IF_ERROR(kept->SetExportAccess(access, {}));
    }
    // Revoked even when the wait for accesses in progress times out.
    absl::Status revoked = region->SetExport(
        RemoteAccess::kNone, 0, nullptr, nullptr, limits_.revoke_drain_timeout);
    Notify(region->name());
    RDMAD_RETURN_IF_ERROR(revoked);
    return region;
  }
  if (region->name().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        DescribeKey(key), " has no name: only named regions can be exported, "
        "so peers can resolve them"));
  }
  RDMAD_ASSIGN_OR_RETURN(auto registration,
                         Register(region->memory(), access));
  absl::MutexLock export_lock(&export_mu_);
  // The record first: if it cannot be written, the export does not change
  // (the new registration is dropped), so a restart brings back what peers
  // see now, access list included.
  if (KeptRegion* kept = region->kept()) {
    RDMAD_RETURN_IF_ERROR(kept->SetExportAccess(
        access, allow != nullptr ? allow->grants() : std::vector<ExportGrant>{}));
  }
  absl::Status changed =
      region->SetExport(access, SecureRandom64(), std::move(registration),
                        std::move(allow), limits_.revoke_drain_timeout);
  Notify(region->name());
  RDMAD_RETURN_IF_ERROR(changed);
  return region;
}

absl::StatusOr<std::shared_ptr<Region>> RegionTable::SetPermissions(
    const Caller& caller, const RegionKey& key, std::optional<uint32_t> mode,
    std::optional<uint32_t> group) {
  if (!mode.has_value() && !group.has_value()) {
    return absl::InvalidArgumentError(
        "nothing to change: give a mode, a group or both");
  }
  // Two changes of one region must not interleave (each reads the ACL,
  // then writes it), and a kept region's record must change in the same
  // order as the ACL in memory: one change at a time, as for exports. Not
  // under the table lock, which transfers need while a record is written.
  absl::MutexLock change_lock(&export_mu_);
  std::shared_ptr<Region> region;
  {
    absl::ReaderMutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(region, FindLocked(key));
  }
  if (region->owner() != RegionOwnerKind::kDaemon) {
    return absl::FailedPreconditionError(absl::StrCat(
        DescribeKey(key),
        " is a session buffer, private to its session: "
        "only named regions (rdmactl alloc) have a mode and a group"));
  }
  RegionAcl acl = region->acl();
  RDMAD_RETURN_IF_ERROR(CheckOwner(caller, acl, DescribeKey(key)));
  if (mode.has_value()) {
    // Unlike at creation, 0 means 0 here: nobody may use it until the
    // owner (who may always chmod) grants access again.
    if ((*mode & ~0666u) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("region mode ", FormatMode(*mode),
                       " has bits other than read (4) "
                       "and write (2) per class: use e.g. 0600, 0640 or 0660"));
    }
    acl.mode = *mode;
  }
  if (group.has_value()) {
    if (caller.uid != 0 && !InGroup(caller, *group)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "uid ", caller.uid, " is not in group ", *group,
          ": a region's group must be one of your groups (root may pick "
          "any)"));
    }
    acl.gid = *group;
  }
  // A change that takes rights away from someone also ends the keys of the
  // region's export: a descriptor (GetDescriptor, which needs the local
  // rights the export grants) is a bearer capability that its holder may
  // have kept or passed on, and only new keys take it back. Peers that
  // name the region resolve it again by themselves.
  const ExportState exported = region->exported();
  std::unique_ptr<Registration> rekeyed;
  if (TakesRightsAway(region->acl(), acl) &&
      exported.access != RemoteAccess::kNone) {
    RDMAD_ASSIGN_OR_RETURN(
        rekeyed, Register(region->memory(), exported.access));
  }
  // The record first: if it cannot be written, nothing changes, so a
  // restart brings back what is in force now.
  if (KeptRegion* kept = region->kept()) {
    RDMAD_RETURN_IF_ERROR(kept->SetAcl(acl));
  }
  region->SetAcl(acl);
  generation_.fetch_add(1, std::memory_order_release);
  if (rekeyed != nullptr) {
    // As a re-export: once this returns, nothing under the old keys
    // touches the region (or the wait timed out, and the new keys are in
    // force all the same).
    absl::Status changed =
        region->SetExport(exported.access, SecureRandom64(), std::move(rekeyed),
                          exported.allow, limits_.revoke_drain_timeout);
    Notify(region->name());
    RDMAD_RETURN_IF_ERROR(changed);
  }
  return region;
}

}  // namespace rdmad::core
