#include "daemon/core/region.h"

#include <utility>

namespace rdmad::core {

Region::Region(uint64_t id, std::string name, RegionOwnerKind owner,
               Caller creator, ShmSegment segment,
               std::unique_ptr<Registration> local_registration,
               std::optional<RegionAcl> acl, std::unique_ptr<KeptRegion> kept)
    : id_(id),
      name_(std::move(name)),
      owner_(owner),
      creator_(creator),
      created_(absl::Now()),
      segment_(std::move(segment)),
      local_registration_(std::move(local_registration)),
      kept_(std::move(kept)),
      acl_(acl.value_or(
          RegionAcl{creator.uid, creator.gid, kDefaultRegionMode})) {}

Region::~Region() = default;

RegionAcl Region::acl() const {
  absl::MutexLock lock(&mu_);
  return acl_;
}

void Region::SetAcl(const RegionAcl& acl) {
  absl::MutexLock lock(&mu_);
  acl_ = acl;
}

ExportState Region::exported() const {
  absl::MutexLock lock(&mu_);
  ExportState state;
  state.access = export_access_;
  state.tcp_key = tcp_key_;
  if (export_registration_ != nullptr) state.keys = export_registration_->keys();
  return state;
}

void Region::SetExport(RemoteAccess access, uint64_t tcp_key,
                       std::unique_ptr<Registration> registration) {
  std::unique_ptr<Registration> old;
  {
    absl::MutexLock lock(&mu_);
    export_access_ = access;
    tcp_key_ = tcp_key;
    old = std::exchange(export_registration_, std::move(registration));
  }
  // ibv_dereg_mr can take a while; not under the lock.
  old.reset();
}

const std::vector<DeviceRegistration>& Region::local_keys() const {
  static const std::vector<DeviceRegistration> kNone;
  return local_registration_ != nullptr ? local_registration_->keys() : kNone;
}

RegionSnapshot Region::Snapshot() const {
  RegionSnapshot s;
  s.id = id_;
  s.name = name_;
  s.size = size();
  s.mapped_size = mapped_size();
  s.owner = owner_;
  s.session_id = owner_ == RegionOwnerKind::kSession ? creator_.session_id : 0;
  const RegionAcl acl = this->acl();
  s.owner_uid = acl.uid;
  s.owner_gid = acl.gid;
  s.mode = acl.mode;
  s.backing = segment_.backing();
  s.created = created_;
  if (local_registration_ != nullptr) s.local_keys = local_registration_->keys();
  s.exported = exported();
  s.addr = reinterpret_cast<uint64_t>(segment_.data());
  return s;
}

}  // namespace rdmad::core
