#include "daemon/state/recorded_region.h"

#include <utility>

#include "common/status_macros.h"

namespace rdmad::state {

absl::Status RecordedRegion::SetExportAccess(
    core::RemoteAccess access, const std::vector<core::ExportGrant>& allow) {
  absl::MutexLock lock(&mu_);
  if (record_.info.export_access == access &&
      record_.info.export_allow == allow) {
    return absl::OkStatus();
  }
  RegionRecord next = record_;
  next.info.export_access = access;
  next.info.export_allow = allow;
  return Change(std::move(next), "export");
}

absl::Status RecordedRegion::SetAcl(const core::RegionAcl& acl) {
  absl::MutexLock lock(&mu_);
  const core::RegionAcl& now = record_.info.acl;
  if (now.uid == acl.uid && now.gid == acl.gid && now.mode == acl.mode) {
    return absl::OkStatus();
  }
  RegionRecord next = record_;
  next.info.acl = acl;
  return Change(std::move(next), "permissions");
}

void RecordedRegion::Forget() {
  absl::MutexLock lock(&mu_);
  if (std::exchange(gone_, true)) return;
  Remove();
}

void RecordedRegion::Discard(const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (std::exchange(gone_, true)) return;
  PutAside(why);
}

absl::Status RecordedRegion::Change(RegionRecord next, absl::string_view what) {
  if (gone_) return absl::OkStatus();
  RDMAD_RETURN_IF_ERROR(Rewrite(next, what));
  record_ = std::move(next);
  return absl::OkStatus();
}

}  // namespace rdmad::state
