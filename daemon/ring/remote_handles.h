// RemoteHandles: the remote regions one session has opened (Local.OpenRemote)
// so that its ring operations can name them by a number. A handle keeps the
// target as the client named it — by name, so that the daemon re-resolves
// it by itself after a re-export or a restart of the peer, or by a
// descriptor, which then fails with a clear status instead — and the size
// and access it had when opened, for the checks the engine makes before
// anything is sent. Bounded (kMaxHandles per session). Thread-safe.
#ifndef RDMAD_DAEMON_RING_REMOTE_HANDLES_H_
#define RDMAD_DAEMON_RING_REMOTE_HANDLES_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/transfer.h"

namespace rdmad::ring {

struct RemoteHandle {
  uint64_t id = 0;
  core::TransferTarget target;  // offset 0
  uint64_t size = 0;
  core::RemoteAccess access = core::RemoteAccess::kNone;
  core::TransportKind transport = core::TransportKind::kNone;
};

class RemoteHandles {
 public:
  static constexpr size_t kMaxHandles = 4096;

  // RESOURCE_EXHAUSTED past kMaxHandles.
  absl::StatusOr<std::shared_ptr<const RemoteHandle>> Add(RemoteHandle handle);
  // Null when unknown (never opened, or closed).
  std::shared_ptr<const RemoteHandle> Find(uint64_t id) const;
  // NOT_FOUND when unknown.
  absl::Status Remove(uint64_t id);
  size_t size() const;
  // How many handles were removed so far: a handle found earlier is still
  // open while this has not changed (the engine keeps the one it used
  // last and looks again only then). Read it after the entry that names
  // the handle.
  uint64_t removals() const {
    return removals_.load(std::memory_order_acquire);
  }

 private:
  mutable absl::Mutex mu_;
  std::atomic<uint64_t> removals_{0};
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const RemoteHandle>> handles_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::ring

#endif  // RDMAD_DAEMON_RING_REMOTE_HANDLES_H_
