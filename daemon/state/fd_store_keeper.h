// FdStoreKeeper: keeps daemon-owned named regions in systemd's file
// descriptor store, for rdmad running as a systemd service.
//
// Each region is a sealed memfd (the same memory rdmad uses anyway), stored
// as "rdmad-mem-SLOT", and its record (region_record.h) in a small sealed
// memfd of its own stored as "rdmad-rec-SLOT-GEN". A record is never
// rewritten: a new export access is a new record with the next GEN, stored
// before the old one is removed, so the store always holds a whole record
// (the next start takes the highest GEN and removes the others). A region
// is created memory-first and freed record-first; memory without a record
// is removed at the next start.
//
// Example:
//   auto keeper = std::make_unique<FdStoreKeeper>(
//       std::make_unique<SystemdFdStore>(), TakeListenFds());
//   Recovery found = keeper->Recover();
//
// Thread-safe.
#ifndef RDMAD_DAEMON_STATE_FD_STORE_KEEPER_H_
#define RDMAD_DAEMON_STATE_FD_STORE_KEEPER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/state/fd_store.h"
#include "daemon/state/recovery.h"

namespace rdmad::state {

class FdStoreKeeper final : public RecoveringKeeper {
 public:
  // `received`: what the store passed back at start (TakeListenFds()).
  FdStoreKeeper(std::unique_ptr<FdStore> store, std::vector<NamedFd> received);
  ~FdStoreKeeper() override;

  absl::StatusOr<core::KeptMemory> Create(
      const core::KeptRegionInfo& info) override;
  std::string Describe() const override;
  Recovery Recover() override;
  size_t DiscardAll() override;
  std::string DiscardedTo() const override;

 private:
  const std::shared_ptr<FdStore> store_;
  absl::Mutex mu_;
  std::vector<NamedFd> received_ ABSL_GUARDED_BY(mu_);
};

// The FDNAMEs, for tests and tools.
std::string MemoryFdName(const std::string& slot);
std::string RecordFdName(const std::string& slot, uint64_t generation);

}  // namespace rdmad::state

#endif  // RDMAD_DAEMON_STATE_FD_STORE_KEEPER_H_
