#include "daemon/core/region.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rdmad::core {
namespace {

// Most addresses AdmitDataPeer remembers per export.
constexpr size_t kMaxAdmittedDataPeers = 256;

const std::shared_ptr<const ExportAccessList>& AdmitEveryone() {
  static const auto* const kEveryone =
      new std::shared_ptr<const ExportAccessList>(
          std::make_shared<ExportAccessList>());
  return *kEveryone;
}

}  // namespace

ExportUse::ExportUse(ExportUse&& other) noexcept
    : region_(std::exchange(other.region_, nullptr)),
      generation_(other.generation_),
      key_(other.key_) {}

ExportUse& ExportUse::operator=(ExportUse&& other) noexcept {
  if (this != &other) {
    End();
    region_ = std::exchange(other.region_, nullptr);
    generation_ = other.generation_;
    key_ = other.key_;
  }
  return *this;
}

ExportUse::~ExportUse() { End(); }

void ExportUse::End() {
  if (region_ != nullptr)
    std::exchange(region_, nullptr)->EndExportUse(generation_);
}

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
          RegionAcl{creator.uid, creator.gid, kDefaultRegionMode})),
      allow_(AdmitEveryone()) {}

Region::~Region() = default;

RegionAcl Region::acl() const {
  absl::MutexLock lock(&mu_);
  return acl_;
}

void Region::SetAcl(const RegionAcl& acl) {
  absl::MutexLock lock(&mu_);
  acl_ = acl;
}

std::string Region::Label() const {
  return name_.empty() ? absl::StrCat("region #", id_)
                       : absl::StrCat("region '", name_, "'");
}

ExportState Region::exported() const {
  absl::MutexLock lock(&mu_);
  ExportState state;
  state.access = export_access_;
  state.tcp_key = tcp_key_;
  if (export_registration_ != nullptr) state.keys = export_registration_->keys();
  state.allow = allow_;
  return state;
}

ExportTerms Region::export_terms() const {
  absl::MutexLock lock(&mu_);
  return ExportTerms{.access = export_access_,
                     .tcp_key = tcp_key_,
                     .epoch = export_epoch_.load(std::memory_order_relaxed)};
}

absl::Status Region::SetExport(RemoteAccess access, uint64_t tcp_key,
                               std::unique_ptr<Registration> registration,
                               std::shared_ptr<const ExportAccessList> allow,
                               absl::Duration drain_timeout) {
  std::unique_ptr<Registration> old;
  bool drained;
  uint64_t left;
  {
    absl::MutexLock lock(&mu_);
    export_access_ = access;
    tcp_key_ = tcp_key;
    allow_ = allow != nullptr ? std::move(allow) : AdmitEveryone();
    admitted_.clear();
    admitted_list_ = PeerAllowList();
    old = std::exchange(export_registration_, std::move(registration));
    // From here no use of the old export can begin; wait for those that
    // did.
    ++generation_;
    export_epoch_.fetch_add(1, std::memory_order_release);
    retired_uses_ += std::exchange(current_uses_, 0);
    drained = mu_.AwaitWithTimeout(
        absl::Condition(
            +[](uint64_t* retired) { return *retired == 0; }, &retired_uses_),
        drain_timeout);
    left = retired_uses_;
  }
  // ibv_dereg_mr can take a while; not under the lock. It is the NIC's
  // barrier: when it returns, the old rkeys reach nothing.
  old.reset();
  if (!drained) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the change of ", Label(),
        "'s export is in force for every new "
        "access, but ",
        left,
        " access(es) that began under the previous "
        "export were still running after ",
        absl::FormatDuration(drain_timeout),
        " and may yet touch its memory (a stuck rdmad thread?): check the "
        "daemon's log and threads"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ExportUse> Region::BeginExportUse(std::optional<uint64_t> key,
                                                 RemoteAccess access) {
  absl::MutexLock lock(&mu_);
  if (export_access_ == RemoteAccess::kNone) {
    return absl::NotFoundError(
        absl::StrCat(Label(),
                     " is not exported (any more): it was revoked or freed; "
                     "resolve it again"));
  }
  if (key.has_value()) {
    // No early exit on the first differing bit: the timing of a refusal
    // says nothing about how much of a guessed key was right.
    volatile uint64_t diff = *key ^ tcp_key_;
    if (diff != 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "the key does not match the current export of ", Label(),
          ": it was re-exported or revoked since it was resolved; resolve it "
          "again"));
    }
  }
  if (!Allows(export_access_, access)) {
    return absl::PermissionDeniedError(absl::StrCat(
        Label(), " is exported ",
        access == RemoteAccess::kWrite ? "read-only: it accepts no WRITE"
                                       : "write-only: it accepts no READ"));
  }
  ++current_uses_;
  // A peer's access to a dma-buf is a CPU access (the TCP data server's
  // readv/sendmsg): bracketed for the exporter (nothing for a memfd).
  segment_.BeginCpuAccess();
  return ExportUse(this, generation_, tcp_key_);
}

void Region::EndExportUse(uint64_t generation) {
  segment_.EndCpuAccess();
  absl::MutexLock lock(&mu_);
  if (generation == generation_) {
    --current_uses_;
  } else {
    --retired_uses_;
  }
}

uint64_t Region::ExportUsesInFlight() const {
  absl::MutexLock lock(&mu_);
  return current_uses_ + retired_uses_;
}

void Region::AdmitDataPeer(const std::string& address) {
  absl::MutexLock lock(&mu_);
  if (std::find(admitted_.begin(), admitted_.end(), address) !=
      admitted_.end()) {
    return;
  }
  auto next = admitted_;
  if (next.size() >= kMaxAdmittedDataPeers) next.erase(next.begin());
  next.push_back(address);
  auto list = PeerAllowList::Parse(next);
  if (!list.ok()) return;  // not an IP address: nothing to admit
  admitted_ = std::move(next);
  admitted_list_ = *std::move(list);
  export_epoch_.fetch_add(1, std::memory_order_release);
}

bool Region::AdmitsDataPeer(const sockaddr_storage& address) const {
  absl::MutexLock lock(&mu_);
  if (allow_->AdmitsAddress(address)) return true;
  return !admitted_.empty() && admitted_list_.AllowsSockaddr(address);
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
