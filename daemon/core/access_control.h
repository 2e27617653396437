// Local access control for named (daemon-owned) regions, modelled on file
// permissions so that operators can reason about it the way they do about
// files under /dev/shm:
//
//   - every named region has an owner uid, a group gid and a mode with read
//     (4) and write (2) bits for owner, group and others (e.g. 0640);
//   - the class that applies is the first that matches, as for files: the
//     owner's bits if the caller's uid is the owner, else the group's bits if
//     the caller is in the group (primary or supplementary, as the kernel
//     reported them on the session socket), else the others' bits;
//   - root (uid 0) may do everything;
//   - managing a region (free, export, change of remote access) is reserved
//     to its owner and root, as chmod and unlink of one's own file are.
// Session buffers are not covered here: only their own session may touch
// them, whatever the uid.
//
// Pure functions, no locks: unit-tested with explicit uids, and fuzzed.
//
// Example:
//   RegionAcl acl{.uid = 1000, .gid = 100, .mode = 0640};
//   RDMAD_RETURN_IF_ERROR(CheckLocalAccess(caller, acl, kLocalRead, "region 'kv'"));
#ifndef RDMAD_DAEMON_CORE_ACCESS_CONTROL_H_
#define RDMAD_DAEMON_CORE_ACCESS_CONTROL_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/region.h"

namespace rdmad::core {

// Permission bits as in a file mode's class triplet (execute is meaningless).
inline constexpr uint32_t kLocalRead = 4;
inline constexpr uint32_t kLocalWrite = 2;
inline constexpr uint32_t kLocalReadWrite = kLocalRead | kLocalWrite;

// True if `gid` is the caller's primary group or one of its supplementary
// groups.
bool InGroup(const Caller& caller, uint32_t gid);

// The read/write bits (kLocalRead, kLocalWrite) `caller` has on `acl`.
uint32_t PermittedBits(const Caller& caller, const RegionAcl& acl);

// OK if `caller` has every bit of `need` on `acl`, else PERMISSION_DENIED
// naming `label`, the missing access, the region's owner/group/mode and
// what to do.
absl::Status CheckLocalAccess(const Caller& caller, const RegionAcl& acl,
                              uint32_t need, absl::string_view label);

// OK if `caller` may free or export the region (its owner, or root).
absl::Status CheckOwner(const Caller& caller, const RegionAcl& acl,
                        absl::string_view label);

// The ACL of a new named region for `caller`: `mode` 0 means
// kDefaultRegionMode; `group` unset means the caller's primary gid.
// INVALID_ARGUMENT for mode bits other than read/write (e.g. 0755, 01600);
// PERMISSION_DENIED for a group the caller is not in (root may pick any).
absl::StatusOr<RegionAcl> MakeAcl(const Caller& caller, uint32_t mode,
                                  std::optional<uint32_t> group);

// True if changing a region's ACL from `before` to `after` may take access
// away from someone: a permission bit goes, or the group changes while the
// group class has bits (the old group's members fall to the others' bits).
bool TakesRightsAway(const RegionAcl& before, const RegionAcl& after);

// "0640" for messages and listings.
std::string FormatMode(uint32_t mode);

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_ACCESS_CONTROL_H_
