#include "daemon/core/access_control.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rdmad::core {
namespace {

// Only read and write bits of the three classes have a meaning.
constexpr uint32_t kValidModeBits = 0666;

std::string Needed(uint32_t need) {
  if (need == kLocalReadWrite) return "read and write";
  return need == kLocalRead ? "read" : "write";
}

}  // namespace

bool InGroup(const Caller& caller, uint32_t gid) {
  return caller.gid == gid ||
         std::find(caller.groups.begin(), caller.groups.end(), gid) !=
             caller.groups.end();
}

uint32_t PermittedBits(const Caller& caller, const RegionAcl& acl) {
  if (caller.uid == 0) return kLocalReadWrite;
  // The first class that matches decides, as for files: an owner whose own
  // bits are 0 is not rescued by the group's or others' bits.
  if (caller.uid == acl.uid) return (acl.mode >> 6) & kLocalReadWrite;
  if (InGroup(caller, acl.gid)) return (acl.mode >> 3) & kLocalReadWrite;
  return acl.mode & kLocalReadWrite;
}

absl::Status CheckLocalAccess(const Caller& caller, const RegionAcl& acl,
                              uint32_t need, absl::string_view label) {
  if ((PermittedBits(caller, acl) & need) == need) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "uid ", caller.uid, " may not ", Needed(need), " ", label,
      " (owner uid ", acl.uid, ", group gid ", acl.gid, ", mode ",
      FormatMode(acl.mode), "): ask its owner for a mode or group that "
      "grants this (rdmactl chmod NAME MODE, rdmactl chgrp NAME GROUP)"));
}

absl::Status CheckOwner(const Caller& caller, const RegionAcl& acl,
                        absl::string_view label) {
  if (caller.uid == 0 || caller.uid == acl.uid) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      label, " belongs to uid ", acl.uid,
      "; only that user or root may free, export, chmod or chgrp it"));
}

absl::StatusOr<RegionAcl> MakeAcl(const Caller& caller, uint32_t mode,
                                  std::optional<uint32_t> group) {
  RegionAcl acl;
  acl.uid = caller.uid;
  acl.gid = group.value_or(caller.gid);
  acl.mode = mode == 0 ? kDefaultRegionMode : mode;
  if ((acl.mode & ~kValidModeBits) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "region mode ", FormatMode(mode), " has bits other than read (4) and "
        "write (2) per class: use e.g. 0600, 0640 or 0660"));
  }
  if (group.has_value() && caller.uid != 0 && !InGroup(caller, *group)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "uid ", caller.uid, " is not in group ", *group,
        ": a region's group must be one of the creator's groups (root may "
        "pick any)"));
  }
  return acl;
}

bool TakesRightsAway(const RegionAcl& before, const RegionAcl& after) {
  constexpr uint32_t kGroupBits = 0060;
  return (before.mode & ~after.mode) != 0 ||
         (before.gid != after.gid && (before.mode & kGroupBits) != 0);
}

std::string FormatMode(uint32_t mode) { return absl::StrFormat("%04o", mode); }

}  // namespace rdmad::core
