#include "daemon/ring/remote_handles.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace rdmad::ring {

absl::StatusOr<std::shared_ptr<const RemoteHandle>> RemoteHandles::Add(
    RemoteHandle handle) {
  absl::MutexLock lock(&mu_);
  if (handles_.size() >= kMaxHandles) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this session already has ", handles_.size(),
        " remote handles open: close those it no longer uses (CloseRemote)"));
  }
  handle.id = next_id_++;
  auto shared = std::make_shared<const RemoteHandle>(std::move(handle));
  handles_.emplace(shared->id, shared);
  return shared;
}

std::shared_ptr<const RemoteHandle> RemoteHandles::Find(uint64_t id) const {
  absl::MutexLock lock(&mu_);
  auto it = handles_.find(id);
  return it == handles_.end() ? nullptr : it->second;
}

absl::Status RemoteHandles::Remove(uint64_t id) {
  absl::MutexLock lock(&mu_);
  if (handles_.erase(id) == 0) {
    return absl::NotFoundError(
        absl::StrCat("no remote handle ", id, " in this session"));
  }
  removals_.fetch_add(1, std::memory_order_release);
  return absl::OkStatus();
}

size_t RemoteHandles::size() const {
  absl::MutexLock lock(&mu_);
  return handles_.size();
}

}  // namespace rdmad::ring
