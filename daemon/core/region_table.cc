#include "daemon/core/region_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/region_address.h"
#include "common/secure_random.h"
#include "common/size.h"
#include "common/status_macros.h"
#include "daemon/core/access_control.h"

namespace rdmad::core {

std::string DescribeKey(const RegionKey& key) {
  if (key.id != 0) return absl::StrCat("region #", key.id);
  return absl::StrCat("region '", key.name, "'");
}

absl::Status CheckExportHasName(const AllocateOptions& options) {
  if (options.export_access == RemoteAccess::kNone || !options.name.empty()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "export_access needs a name: only named regions can be exported, so "
      "that peers can resolve them; give the region a name or leave "
      "export_access unset");
}

RegionTable::RegionTable(MemoryRegistrar* registrar, RegionLimits limits,
                         RegionKeeper* keeper)
    : registrar_(registrar), limits_(limits), keeper_(keeper) {}

RegionTable::~RegionTable() = default;

void RegionTable::Notify(const std::string& name) const {
  if (name.empty()) return;
  if (RegionObserver* observer = observer_.load(std::memory_order_acquire)) {
    observer->OnRegionChanged(name);
  }
}

absl::Status RegionTable::CheckNew(const Caller& caller,
                                   const AllocateOptions& options) const {
  if (options.size == 0) {
    return absl::InvalidArgumentError(
        "region size is 0: ask for at least one byte");
  }
  if (limits_.max_region_size != 0 && options.size > limits_.max_region_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "region size ", options.size, " bytes is larger than this node can "
        "register (", limits_.max_region_size, " bytes, ",
        FormatSize(limits_.max_region_size), ")"));
  }
  if (options.daemon_owned && options.name.empty()) {
    return absl::InvalidArgumentError(
        "a daemon-owned region needs a name, so it can be found and freed "
        "later");
  }
  RDMAD_RETURN_IF_ERROR(CheckExportHasName(options));
  if (!options.daemon_owned && (options.mode != 0 || options.group)) {
    return absl::InvalidArgumentError(
        "mode and group apply to daemon-owned named regions; a session "
        "buffer is private to its session");
  }
  if (options.daemon_owned) {
    RDMAD_RETURN_IF_ERROR(MakeAcl(caller, options.mode, options.group).status());
  }
  if (!options.daemon_owned && caller.session_id == 0) {
    return absl::UnauthenticatedError(
        "session buffers need a session: connect with the client library "
        "(rdmad::Client) so the daemon can free them when the process exits");
  }
  if (!options.name.empty()) {
    RDMAD_RETURN_IF_ERROR(ValidateRegionName(options.name));
    if (by_name_.contains(options.name)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "a region named '", options.name,
          "' already exists: pick another name or free it first"));
    }
  }
  if (limits_.max_pinned_bytes != 0) {
    const uint64_t in_use = pinned_bytes_ + reserved_bytes_;
    if (options.size > limits_.max_pinned_bytes ||
        in_use > limits_.max_pinned_bytes - options.size) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "allocating ", HumanSize(options.size), " would bring all regions "
          "to ", HumanSize(in_use + options.size), ", over max_pinned_bytes "
          "of ", HumanSize(limits_.max_pinned_bytes),
          limits_.max_pinned_bytes_source.empty()
              ? std::string()
              : absl::StrCat(" (", limits_.max_pinned_bytes_source, ")"),
          ", with ", HumanSize(in_use), " in use: free regions, or raise it "
          "and restart rdmad"));
    }
  }
  return CheckQuota(caller, options.size);
}

absl::StatusOr<std::shared_ptr<Region>> RegionTable::Allocate(
    const Caller& caller, const AllocateOptions& options) {
  {
    absl::MutexLock lock(&mu_);
    RDMAD_RETURN_IF_ERROR(CheckNew(caller, options));
    reserved_bytes_ += options.size;
    UidUsage& used = usage_[caller.uid];
    ++used.regions;
    used.pinned_bytes += options.size;
  }
  auto memory = NewMemory(caller, options);
  if (!memory.ok()) {
    absl::MutexLock lock(&mu_);
    reserved_bytes_ -= options.size;
    Uncharge(caller.uid, 1, options.size);
    return memory.status();
  }
  return Insert(caller, options, std::move(memory->segment),
                std::move(memory->kept), std::nullopt, /*restoring=*/false);
}

absl::StatusOr<KeptMemory> RegionTable::NewMemory(
    const Caller& caller, const AllocateOptions& options) {
  if (keeper_ == nullptr || !options.daemon_owned) {
    RDMAD_ASSIGN_OR_RETURN(
        ShmSegment segment,
        ShmSegment::Create(options.name.empty() ? "buffer" : options.name,
                           options.size));
    return KeptMemory{std::move(segment), nullptr};
  }
  KeptRegionInfo info;
  info.name = options.name;
  info.size = options.size;
  RDMAD_ASSIGN_OR_RETURN(info.acl,
                         MakeAcl(caller, options.mode, options.group));
  info.export_access = options.export_access;
  return keeper_->Create(info);
}

absl::StatusOr<std::shared_ptr<Region>> RegionTable::AdoptClientMemory(
    const Caller& caller, const AllocateOptions& options,
    absl::FunctionRef<absl::StatusOr<ShmSegment>()> take) {
  if (options.daemon_owned) {
    return absl::InvalidArgumentError(
        "client memory cannot be daemon-owned: it belongs to the client");
  }
  {
    absl::MutexLock lock(&mu_);
    RDMAD_RETURN_IF_ERROR(CheckNew(caller, options));
    reserved_bytes_ += options.size;
    UidUsage& used = usage_[caller.uid];
    ++used.regions;
    used.pinned_bytes += options.size;
  }
  auto segment = take();
  if (!segment.ok()) {
    absl::MutexLock lock(&mu_);
    reserved_bytes_ -= options.size;
    Uncharge(caller.uid, 1, options.size);
    return segment.status();
  }
  return Insert(caller, options, *std::move(segment), nullptr, std::nullopt,
                /*restoring=*/false);
}

absl::StatusOr<std::shared_ptr<Region>> RegionTable::Adopt(
    const Caller& caller, UniqueFd memfd, const AllocateOptions& options) {
  return AdoptClientMemory(caller, options, [&] {
    return ShmSegment::Adopt(std::move(memfd), options.size);
  });
}

absl::StatusOr<std::shared_ptr<Region>> RegionTable::AdoptDmabuf(
    const Caller& caller, UniqueFd dmabuf, uint64_t offset,
    const AllocateOptions& options) {
  return AdoptClientMemory(
      caller, options, [&]() -> absl::StatusOr<ShmSegment> {
        RDMAD_ASSIGN_OR_RETURN(
            ShmSegment segment,
            ShmSegment::AdoptDmabuf(std::move(dmabuf), offset, options.size));
        // Refused here, the segment closes the descriptor.
        RDMAD_RETURN_IF_ERROR(CheckDmabufServable(
            registrar_->DmabufCapabilities(), segment.cpu_map_error()));
        return segment;
      });
}

absl::StatusOr<std::shared_ptr<Region>> RegionTable::Restore(
    const KeptRegionInfo& info, ShmSegment segment,
    std::unique_ptr<KeptRegion> kept) {
  auto refuse = [&kept](absl::Status status) {
    kept->Discard(std::string(status.message()));
    return status;
  };
  if (kept == nullptr) {
    return absl::InvalidArgumentError("a restored region needs its kept state");
  }
  if (absl::Status s = ValidateRegionName(info.name); !s.ok()) return refuse(s);
  if (info.size == 0 || info.size != segment.size()) {
    return refuse(absl::InvalidArgumentError(absl::StrCat(
        "the record says ", info.size, " bytes but ", segment.size(),
        " were mapped")));
  }
  // The owner as the kernel would have reported it; no session.
  const Caller owner{0, info.acl.uid, info.acl.gid, 0, {}};
  AllocateOptions options;
  options.size = info.size;
  options.name = info.name;
  options.daemon_owned = true;
  options.export_access = info.export_access;
  // The export comes back with the access list it had, never wider.
  std::shared_ptr<const ExportAccessList> allow;
  if (!info.export_allow.empty()) {
    auto parsed = ExportAccessList::Parse(info.export_allow);
    if (!parsed.ok()) {
      return refuse(absl::DataLossError(absl::StrCat(
          "its export access list does not parse: ",
          parsed.status().message())));
    }
    allow = std::make_shared<const ExportAccessList>(*std::move(parsed));
  }
  {
    absl::MutexLock lock(&mu_);
    if (limits_.max_region_size != 0 && info.size > limits_.max_region_size) {
      return refuse(absl::FailedPreconditionError(absl::StrCat(
          "its size, ", info.size, " bytes, is larger than this node can "
          "register now (", limits_.max_region_size, " bytes)")));
    }
    if (by_name_.contains(info.name)) {
      return refuse(absl::AlreadyExistsError(absl::StrCat(
          "a region named '", info.name, "' exists already")));
    }
    const uint64_t in_use = pinned_bytes_ + reserved_bytes_;
    if (limits_.max_pinned_bytes != 0 &&
        (segment.mapped_size() > limits_.max_pinned_bytes ||
         in_use > limits_.max_pinned_bytes - segment.mapped_size())) {
      return refuse(absl::ResourceExhaustedError(absl::StrCat(
          "adopting its ", segment.mapped_size(), " bytes would pin ",
          in_use + segment.mapped_size(), " bytes, over the daemon's "
          "locked-memory limit of ", limits_.max_pinned_bytes,
          " bytes: raise max_pinned_bytes or LimitMEMLOCK=")));
    }
    reserved_bytes_ += info.size;
    UidUsage& used = usage_[owner.uid];
    ++used.regions;
    used.pinned_bytes += info.size;
  }
  return Insert(owner, options, std::move(segment), std::move(kept),
                info.acl, /*restoring=*/true, std::move(allow));
}

absl::StatusOr<std::unique_ptr<Registration>> RegionTable::RegisterOnce(
    const ShmSegment& memory, RemoteAccess access) {
  if (memory.is_dmabuf()) {
    return registrar_->RegisterDmabuf(memory.dmabuf_range(), access);
  }
  return registrar_->Register(memory.data(), memory.size(), access);
}

absl::StatusOr<std::unique_ptr<Registration>> RegionTable::Register(
    const ShmSegment& memory, RemoteAccess access) {
  auto registered = RegisterOnce(memory, access);
  // ENOMEM (RESOURCE_EXHAUSTED) or EAGAIN (UNAVAILABLE) from ibv_reg_mr.
  const auto short_of_memory = [](const absl::Status& s) {
    return absl::IsResourceExhausted(s) || absl::IsUnavailable(s);
  };
  if (registered.ok() || !short_of_memory(registered.status()) ||
      !releaser_->busy()) {
    return registered;
  }
  releaser_->WaitIdle(kReleaseWait);
  return RegisterOnce(memory, access);
}

absl::StatusOr<std::shared_ptr<Region>> RegionTable::Insert(
    const Caller& caller, const AllocateOptions& options, ShmSegment segment,
    std::unique_ptr<KeptRegion> kept, std::optional<RegionAcl> acl,
    bool restoring, std::shared_ptr<const ExportAccessList> allow) {
  // Registration pins and maps pages; it runs outside the table lock.
  auto local = Register(segment, RemoteAccess::kNone);
  std::unique_ptr<Registration> exported;
  if (local.ok() && options.export_access != RemoteAccess::kNone) {
    auto reg = Register(segment, options.export_access);
    if (!reg.ok()) local = reg.status();
    else exported = *std::move(reg);
  }

  if (options.daemon_owned && !acl.has_value()) {
    // Checked in CheckNew already; cannot fail differently now.
    auto made = MakeAcl(caller, options.mode, options.group);
    if (made.ok()) acl = *made;
  }
  // A new region that does not make it into the table leaves no kept
  // state; one being restored is put aside, never half-used.
  auto refuse = [&kept, restoring](absl::Status status) {
    if (kept != nullptr && restoring) {
      kept->Discard(std::string(status.message()));
    } else if (kept != nullptr) {
      kept->Forget();
    }
    return status;
  };
  // (A scoped MutexLock, not ReleasableMutexLock: the latter unlocks inside
  // the abseil library, where the TSan build's lock shim cannot see it.)
  absl::Status refused;
  std::shared_ptr<Region> region;
  {
    absl::MutexLock lock(&mu_);
    reserved_bytes_ -= options.size;
    // The charge moves from the requested size to the mapped size (or goes).
    Uncharge(caller.uid, 1, options.size);
    if (!local.ok()) {
      refused = local.status();
    } else if (!options.name.empty() && by_name_.contains(options.name)) {
      // The name was free when checked, but another allocation may have
      // taken it while we registered.
      refused = absl::AlreadyExistsError(absl::StrCat(
          "a region named '", options.name,
          "' already exists: pick another name or free it first"));
    } else {
      const uint64_t id = next_id_++;
      const uint64_t pinned = segment.mapped_size();
      UidUsage& used = usage_[caller.uid];
      ++used.regions;
      used.pinned_bytes += pinned;
      // Its last holder may be an event loop: the deleter hands the
      // teardown (milliseconds for a large region) to the releaser then.
      region = std::shared_ptr<Region>(
          new Region(id, options.name,
                     options.daemon_owned ? RegionOwnerKind::kDaemon
                                          : RegionOwnerKind::kSession,
                     caller, std::move(segment), *std::move(local), acl,
                     std::move(kept)),
          RegionReleaser::Deleter{releaser_});
      if (options.export_access != RemoteAccess::kNone) {
        // A new region: nothing can be using it yet, so nothing to wait
        // for.
        region
            ->SetExport(options.export_access, SecureRandom64(),
                        std::move(exported), std::move(allow))
            .IgnoreError();
      }
      by_id_[id] = region;
      if (!options.name.empty()) by_name_[options.name] = id;
      pinned_bytes_ += pinned;
    }
  }
  // Outside the lock: putting kept state aside does file I/O.
  if (!refused.ok()) return refuse(refused);
  if (options.export_access != RemoteAccess::kNone) Notify(options.name);
  return region;
}

absl::StatusOr<std::shared_ptr<Region>> RegionTable::FindLocked(
    const RegionKey& key) const {
  if (key.id == 0 && key.name.empty()) {
    return absl::InvalidArgumentError("no region given: name it by id or name");
  }
  uint64_t id = key.id;
  if (id == 0) {
    auto it = by_name_.find(key.name);
    if (it == by_name_.end()) {
      return absl::NotFoundError(absl::StrCat(
          "no region named '", key.name, "' on this daemon (see rdmactl regions)"));
    }
    id = it->second;
  }
  auto it = by_id_.find(id);
  if (it == by_id_.end()) {
    return absl::NotFoundError(absl::StrCat(
        DescribeKey(key), " does not exist (freed, or never allocated)"));
  }
  return it->second;
}

absl::Status RegionTable::CheckManage(const Caller& caller,
                                      const Region& region,
                                      const RegionKey& key) {
  if (region.owner() == RegionOwnerKind::kSession) {
    if (caller.session_id == 0 ||
        caller.session_id != region.creator().session_id) {
      return absl::PermissionDeniedError(absl::StrCat(
          DescribeKey(key), " is a buffer of another client session"));
    }
    return absl::OkStatus();
  }
  return CheckOwner(caller, region.acl(), DescribeKey(key));
}

absl::Status RegionTable::Free(const Caller& caller, const RegionKey& key) {
  std::shared_ptr<Region> region;
  {
    absl::MutexLock lock(&mu_);
    RDMAD_ASSIGN_OR_RETURN(region, FindLocked(key));
    RDMAD_RETURN_IF_ERROR(CheckManage(caller, *region, key));
    by_id_.erase(region->id());
    if (!region->name().empty()) by_name_.erase(region->name());
    pinned_bytes_ -= region->mapped_size();
    Uncharge(region->creator().uid, 1, region->mapped_size());
    generation_.fetch_add(1, std::memory_order_release);
  }
  // Revoke remote access now, even if a transfer still holds the memory,
  // and wait for peer accesses in progress: after this, none touches it.
  absl::Status revoked;
  {
    absl::MutexLock export_lock(&export_mu_);
    revoked = region->SetExport(RemoteAccess::kNone, 0, nullptr, nullptr,
                                limits_.revoke_drain_timeout);
    // Freed for good: the next daemon must not bring it back.
    if (KeptRegion* kept = region->kept()) kept->Forget();
  }
  Notify(region->name());
  if (!revoked.ok()) {
    return absl::Status(
        revoked.code(),
        absl::StrCat(DescribeKey(key), " was freed, but ", revoked.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Region>> RegionTable::FindForUse(
    const Caller& caller, const RegionKey& key, uint32_t need) const {
  absl::ReaderMutexLock lock(&mu_);
  RDMAD_ASSIGN_OR_RETURN(auto region, FindLocked(key));
  if (region->owner() == RegionOwnerKind::kSession) {
    RDMAD_RETURN_IF_ERROR(CheckManage(caller, *region, key));
  } else if (const RegionAcl acl = region->acl();
             (PermittedBits(caller, acl) & need) != need) {
    // The label is built only for the message: this runs per transfer.
    return CheckLocalAccess(caller, acl, need, DescribeKey(key));
  }
  return region;
}

absl::StatusOr<std::shared_ptr<Region>> RegionTable::FindExported(
    const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_name_.find(name);
  if (it != by_name_.end()) {
    auto region = by_id_.at(it->second);
    if (region->export_terms().access != RemoteAccess::kNone) return region;
  }
  // The same answer whether the name is unknown or only not exported: peers
  // learn nothing of local regions.
  return absl::NotFoundError(absl::StrCat(
      "no exported region named '", name, "' on this daemon: on its node, "
      "'rdmactl regions' lists the regions, 'rdmactl export NAME r|w|rw' "
      "exports one, 'rdmactl alloc NAME SIZE --export rw' creates one "
      "exported; a program exports with Client::Export, or names and "
      "exports a buffer it allocates with AllocateOptions{.name, "
      ".export_access}"));
}

absl::StatusOr<std::shared_ptr<Region>> RegionTable::FindExportedById(
    uint64_t id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_id_.find(id);
  if (it != by_id_.end() &&
      it->second->export_terms().access != RemoteAccess::kNone) {
    return it->second;
  }
  return absl::NotFoundError(absl::StrCat(
      "region #", id, " is not exported by this daemon any more (freed, "
      "unexported, or the daemon restarted): if you named it by a "
      "descriptor, get a new one on that node with 'rdmactl descriptor "
      "NAME'; a region named HOST:PORT/NAME is looked up again on the next "
      "transfer"));
}

size_t RegionTable::FreeSession(uint64_t session_id) {
  std::vector<std::shared_ptr<Region>> freed;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = by_id_.begin(); it != by_id_.end();) {
      const Region& region = *it->second;
      if (region.owner() == RegionOwnerKind::kSession &&
          region.creator().session_id == session_id) {
        if (!region.name().empty()) by_name_.erase(region.name());
        pinned_bytes_ -= region.mapped_size();
        Uncharge(region.creator().uid, 1, region.mapped_size());
        freed.push_back(std::move(it->second));
        by_id_.erase(it++);
      } else {
        ++it;
      }
    }
    if (!freed.empty()) generation_.fetch_add(1, std::memory_order_release);
  }
  // The session is gone either way; a revocation that timed out (a stuck
  // thread) cannot be reported to anyone here.
  for (auto& region : freed) {
    region
        ->SetExport(RemoteAccess::kNone, 0, nullptr, nullptr,
                    limits_.revoke_drain_timeout)
        .IgnoreError();
    Notify(region->name());
  }
  return freed.size();
}

}  // namespace rdmad::core
