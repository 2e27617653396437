// Region: one block of shared memory the daemon owns on behalf of a session
// or of the daemon itself, with its registrations and export state.
#ifndef RDMAD_DAEMON_CORE_REGION_H_
#define RDMAD_DAEMON_CORE_REGION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/kept_region.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/core/shm_segment.h"

namespace rdmad::core {

enum class RegionOwnerKind { kSession, kDaemon };

// Who is asking, as the kernel told the daemon (SO_PEERCRED).
struct Caller {
  uint64_t session_id = 0;  // 0: no session (inspection only)
  uint32_t uid = 0;
  uint32_t gid = 0;
  int32_t pid = 0;
  // Supplementary groups (SO_PEERGROUPS), for region group permissions.
  std::vector<uint32_t> groups;
};

// Mode of a named region created without one: owner read/write only.
inline constexpr uint32_t kDefaultRegionMode = 0600;

// Who may use a region locally, like a file's owner, group and mode (see
// access_control.h). Session buffers carry their creator's ids and mode 0600
// but are checked by session instead.
struct RegionAcl {
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t mode = kDefaultRegionMode;
};

// Export state as peers see it.
struct ExportState {
  RemoteAccess access = RemoteAccess::kNone;
  uint64_t tcp_key = 0;                   // key peers present on TCP
  std::vector<DeviceRegistration> keys;   // rkeys of the export registration
};

// A copy of a region's fields, safe to read without locks.
struct RegionSnapshot {
  uint64_t id = 0;
  std::string name;
  uint64_t size = 0;
  uint64_t mapped_size = 0;
  RegionOwnerKind owner = RegionOwnerKind::kSession;
  uint64_t session_id = 0;
  uint32_t owner_uid = 0;
  uint32_t owner_gid = 0;  // the region's group
  uint32_t mode = kDefaultRegionMode;
  std::string backing;
  absl::Time created;
  std::vector<DeviceRegistration> local_keys;
  ExportState exported;
  uint64_t addr = 0;  // the daemon's virtual address of the mapping
};

// Shared by the region table and in-flight transfers: a transfer holds a
// shared_ptr, so freeing a region while a transfer uses it only drops the
// table's reference, and the memory stays mapped (and registered) until the
// transfer completes. Thread-safe.
class Region {
 public:
  // `acl` defaults to the creator's uid and gid with kDefaultRegionMode.
  // `kept`: the region's state in a RegionKeeper, for daemon-owned regions
  // that outlive the daemon; null otherwise.
  Region(uint64_t id, std::string name, RegionOwnerKind owner, Caller creator,
         ShmSegment segment, std::unique_ptr<Registration> local_registration,
         std::optional<RegionAcl> acl = std::nullopt,
         std::unique_ptr<KeptRegion> kept = nullptr);
  ~Region();

  uint64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  uint64_t size() const { return segment_.size(); }
  uint64_t mapped_size() const { return segment_.mapped_size(); }
  RegionOwnerKind owner() const { return owner_; }
  const Caller& creator() const { return creator_; }
  // Owner, group and mode for local access (a copy: chmod/chgrp may change
  // them at any time).
  RegionAcl acl() const ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces group and mode (the owner never changes). Checks are the
  // caller's (RegionTable::SetPermissions).
  void SetAcl(const RegionAcl& acl) ABSL_LOCKS_EXCLUDED(mu_);
  char* data() const { return static_cast<char*>(segment_.data()); }
  int fd() const { return segment_.fd(); }
  // See ShmSegment::can_shrink().
  bool can_shrink() const { return segment_.can_shrink(); }
  // The region's kept state (see region_keeper.h), or null when the region
  // ends with this daemon. Fixed for the region's life.
  KeptRegion* kept() const { return kept_.get(); }

  // Current export state.
  ExportState exported() const ABSL_LOCKS_EXCLUDED(mu_);

  // Replaces the export state: the old export registration (if any) is
  // deregistered, which revokes the rkeys and the TCP key peers were given.
  void SetExport(RemoteAccess access, uint64_t tcp_key,
                 std::unique_ptr<Registration> registration)
      ABSL_LOCKS_EXCLUDED(mu_);

  RegionSnapshot Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

  // Keys of the local-access registration on each device (lkeys for posting
  // work requests from this memory); empty on nodes without RDMA devices.
  // Fixed for the region's life, so no lock.
  const std::vector<DeviceRegistration>& local_keys() const;

 private:
  const uint64_t id_;
  const std::string name_;
  const RegionOwnerKind owner_;
  const Caller creator_;
  const absl::Time created_;
  // Declared before the registrations so that they are deregistered before
  // the memory they cover is unmapped.
  ShmSegment segment_;
  const std::unique_ptr<Registration> local_registration_;
  const std::unique_ptr<KeptRegion> kept_;

  mutable absl::Mutex mu_;
  RegionAcl acl_ ABSL_GUARDED_BY(mu_);
  RemoteAccess export_access_ ABSL_GUARDED_BY(mu_) = RemoteAccess::kNone;
  uint64_t tcp_key_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<Registration> export_registration_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_REGION_H_
