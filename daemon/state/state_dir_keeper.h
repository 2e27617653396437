// StateDirKeeper: keeps daemon-owned named regions in a state directory on
// a tmpfs or hugetlbfs mount (config state_dir), for daemons that do not
// run under systemd.
//
// Per region the directory holds SLOT.mem, the region's memory (the daemon
// maps it; clients that may map the region get its descriptor), and
// SLOT.rec, its record (region_record.h), written atomically (a temporary
// file, fsync, rename). A region is created memory-first and freed
// record-first, so a crash at any point leaves either a whole region or a
// memory file without a record, which the next start removes. Records and
// memory that cannot be adopted are moved into damaged/ with a SLOT.why
// note, never adopted and never deleted behind the operator's back.
//
// The directory must belong to the daemon's user and be writable by no one
// else (its records say who may use each region), and one daemon at a time
// uses it (an flock for the keeper's life).
//
// Example:
//   auto keeper = StateDirKeeper::Open("/dev/shm/rdmad");
//   Recovery found = (*keeper)->Recover();     // at start
//   RegionTable table(&registrar, limits, keeper->get());
//   for (auto& r : found.regions)
//     table.Restore(r.info, std::move(r.segment), std::move(r.kept));
//
// Thread-safe.
#ifndef RDMAD_DAEMON_STATE_STATE_DIR_KEEPER_H_
#define RDMAD_DAEMON_STATE_STATE_DIR_KEEPER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/state/recovery.h"

namespace rdmad::state {

class StateDirKeeper final : public RecoveringKeeper {
 public:
  // Opens the directory at `path` (an absolute path), creating it with mode
  // 0700 if it does not exist, and locks it. INVALID_ARGUMENT when it is
  // not a directory of this user closed to others' writes (or cannot be
  // made one), ALREADY_EXISTS when another daemon holds it: configuration
  // errors that a restart does not fix (rdmad exits with status 2).
  static absl::StatusOr<std::unique_ptr<StateDirKeeper>> Open(
      const std::string& path);
  ~StateDirKeeper() override;

  absl::StatusOr<core::KeptMemory> Create(
      const core::KeptRegionInfo& info) override;
  std::string Describe() const override;
  Recovery Recover() override;
  size_t DiscardAll() override;
  std::string DiscardedTo() const override;

  const std::string& path() const;
  // The directory's filesystem, e.g. "tmpfs", "hugetlbfs", or
  // "a disk filesystem (type 0xef53)".
  std::string filesystem() const;
  // True on tmpfs, hugetlbfs or ramfs: memory, not a disk.
  bool in_memory() const;

  // The state shared with each region's handle.
  struct Dir;

 private:
  explicit StateDirKeeper(std::shared_ptr<Dir> dir);
  std::shared_ptr<Dir> dir_;
};

}  // namespace rdmad::state

#endif  // RDMAD_DAEMON_STATE_STATE_DIR_KEEPER_H_
