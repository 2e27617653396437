#include "daemon/peer/call_tracker.h"

#include <utility>
#include <vector>

#include "grpcpp/client_context.h"
#include "spdlog/spdlog.h"

namespace rdmad::peer {

bool CallTracker::Track(grpc::ClientContext* context,
                        std::shared_ptr<void> owner) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  calls_.emplace(context, std::move(owner));
  return true;
}

void CallTracker::Untrack(grpc::ClientContext* context) {
  // Erased under the lock: Shutdown's wait cannot end before the owner is
  // gone.
  absl::MutexLock lock(&mu_);
  calls_.erase(context);
}

size_t CallTracker::size() const {
  absl::MutexLock lock(&mu_);
  return calls_.size();
}

void CallTracker::Shutdown(absl::Duration timeout) {
  // TryCancel runs outside the lock (the callback it triggers takes it);
  // the copied owners keep the contexts alive meanwhile.
  std::vector<std::pair<grpc::ClientContext*, std::shared_ptr<void>>> calls;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    calls.assign(calls_.begin(), calls_.end());
  }
  for (auto& [context, owner] : calls) context->TryCancel();
  calls.clear();
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(
          absl::Condition(
              +[](absl::flat_hash_map<grpc::ClientContext*,
                                      std::shared_ptr<void>>* pending) {
                return pending->empty();
              },
              &calls_),
          timeout)) {
    spdlog::error("{} peer call(s) did not end within {} of being cancelled",
                  calls_.size(), absl::FormatDuration(timeout));
  }
}

}  // namespace rdmad::peer
