// Region: one block of shared memory the daemon owns on behalf of a session
// or of the daemon itself, with its registrations and export state.
#ifndef RDMAD_DAEMON_CORE_REGION_H_
#define RDMAD_DAEMON_CORE_REGION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/kept_region.h"
#include "daemon/core/export_access_list.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/core/peer_allow_list.h"
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
  // Remote principals admitted; never null (an empty list admits all).
  std::shared_ptr<const ExportAccessList> allow;
};

// The part of ExportState a TCP request is checked against, and the export
// epoch it was read in (Region::export_epoch).
struct ExportTerms {
  RemoteAccess access = RemoteAccess::kNone;
  uint64_t tcp_key = 0;
  uint64_t epoch = 0;
};

// How long a revocation (unexport, re-export, free) waits for accesses that
// began under the old export to finish. Each access is one bounded step (a
// non-blocking socket call, or a 1 MiB copy), so this is reached only if a
// thread is stuck; see Region::SetExport.
inline constexpr absl::Duration kRevokeDrainTimeout = absl::Seconds(10);

class Region;

// One access to a region's memory under one export: a TCP data server's
// readv into the region or sendmsg from it, one chunk of a local copy. While
// it lives, a revocation of that export waits for it (Region::SetExport);
// once the export has changed, no new use of the old one can begin. That is
// what makes unexport and free a barrier, as ibv_dereg_mr is on a NIC.
// Move-only; ends when destroyed. Keep it for one bounded step, never across
// a wait for a peer.
class ExportUse {
 public:
  ExportUse(ExportUse&& other) noexcept;
  ExportUse& operator=(ExportUse&& other) noexcept;
  ExportUse(const ExportUse&) = delete;
  ExportUse& operator=(const ExportUse&) = delete;
  ~ExportUse();

  // The TCP key of the export this use is under.
  uint64_t key() const { return key_; }

 private:
  friend class Region;
  ExportUse(Region* region, uint64_t generation, uint64_t key)
      : region_(region), generation_(generation), key_(key) {}
  void End();

  Region* region_ = nullptr;  // Not owned; its holder keeps it alive.
  uint64_t generation_ = 0;
  uint64_t key_ = 0;
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
// transfer completes. What an export lets peers do is a different matter:
// every access under an export is an ExportUse, and changing or revoking
// the export waits for those (SetExport), so that revocation is a barrier.
// Thread-safe.
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
  // "region 'NAME'", or "region #ID" for one without a name: for messages.
  std::string Label() const;
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
  // The memory itself: a memfd, a state file or a client's dma-buf (see
  // ShmSegment::is_dmabuf, cpu_mapped). Fixed for the region's life.
  const ShmSegment& memory() const { return segment_; }
  // The region's kept state (see region_keeper.h), or null when the region
  // ends with this daemon. Fixed for the region's life.
  KeptRegion* kept() const { return kept_.get(); }

  // Current export state.
  ExportState exported() const ABSL_LOCKS_EXCLUDED(mu_);
  // The current export's access and TCP key, read together: what a peer's
  // request is checked against, per operation, without copying the rkeys
  // and the allow list that exported() returns.
  ExportTerms export_terms() const ABSL_LOCKS_EXCLUDED(mu_);
  // Changes whenever what a peer's request is checked against may have:
  // every SetExport and every change of the admitted peers. A server that
  // checked a request against terms of epoch E may check the next one
  // against the same terms while this still reads E, without the locks.
  uint64_t export_epoch() const {
    return export_epoch_.load(std::memory_order_acquire);
  }

  // Replaces the export state, as a barrier: when it returns, no access
  // under the old export (TCP key, rkeys) touches the memory any more.
  //   1. the new state is installed, so no new use of the old one begins;
  //   2. it waits, at most `drain_timeout`, for uses of the old export that
  //      are still running (ExportUse);
  //   3. the old export registration is deregistered (ibv_dereg_mr, the
  //      NIC's barrier for rkeys).
  // DEADLINE_EXCEEDED if step 2 timed out: the new state is in force for
  // every new access, but an access that began before may still be
  // running (the message says how many).
  absl::Status SetExport(
      RemoteAccess access, uint64_t tcp_key,
      std::unique_ptr<Registration> registration,
      std::shared_ptr<const ExportAccessList> allow = nullptr,
      absl::Duration drain_timeout = kRevokeDrainTimeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Begins one access under the current export, for `access` (kRead: the
  // bytes leave the region; kWrite: they land in it). With `key`, the
  // current export must be the one that key belongs to. NOT_FOUND when the
  // region is not exported (revoked); PERMISSION_DENIED for a key of an
  // earlier export or an access the export does not grant.
  absl::StatusOr<ExportUse> BeginExportUse(std::optional<uint64_t> key,
                                           RemoteAccess access)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Uses of any export still running (for tests and diagnostics).
  uint64_t ExportUsesInFlight() const ABSL_LOCKS_EXCLUDED(mu_);

  // Records that `address` (an IP) was admitted by the access list when it
  // resolved the current export through a certificate entry, so that its
  // data connections (which carry no certificate) are admitted too.
  // Cleared by every SetExport. Bounded; the oldest is forgotten first.
  void AdmitDataPeer(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);

  // Whether a TCP data connection from `address` may use the current
  // export: its access list admits the address, or a Resolve from it was
  // admitted (AdmitDataPeer).
  bool AdmitsDataPeer(const sockaddr_storage& address) const
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

  friend class ExportUse;
  void EndExportUse(uint64_t generation) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  RegionAcl acl_ ABSL_GUARDED_BY(mu_);
  RemoteAccess export_access_ ABSL_GUARDED_BY(mu_) = RemoteAccess::kNone;
  uint64_t tcp_key_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<Registration> export_registration_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const ExportAccessList> allow_ ABSL_GUARDED_BY(mu_);
  // Addresses admitted through certificate entries (AdmitDataPeer).
  std::vector<std::string> admitted_ ABSL_GUARDED_BY(mu_);
  PeerAllowList admitted_list_ ABSL_GUARDED_BY(mu_);
  // Every SetExport starts a new generation. Uses of the current one are
  // counted in current_uses_; those of earlier ones, which a SetExport is
  // waiting for, in retired_uses_.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 1;
  // Advanced under mu_; read without it (export_epoch).
  std::atomic<uint64_t> export_epoch_{1};
  uint64_t current_uses_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t retired_uses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_REGION_H_
