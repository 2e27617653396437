#include "daemon/runtime/turn_batch.h"

#include <utility>
#include <vector>

namespace rdmad::runtime {
namespace {

struct ThreadBatch {
  int depth = 0;
  // In the order first deferred. A turn names a handful (one per client
  // queue it completed for): a linear search beats a hash set.
  std::vector<std::shared_ptr<TurnDeferred>> pending;
};

ThreadBatch& Current() {
  thread_local ThreadBatch batch;
  return batch;
}

}  // namespace

TurnBatch::Scope::Scope() { ++Current().depth; }

TurnBatch::Scope::~Scope() {
  ThreadBatch& batch = Current();
  if (--batch.depth > 0) return;
  // Flushes run with no scope open, so Defer cannot append to the list
  // while it is flushed (a flush that opens a scope of its own flushes
  // that one itself): one pass, over a list taken out of `pending`.
  std::vector<std::shared_ptr<TurnDeferred>> flushing;
  flushing.swap(batch.pending);
  for (auto& what : flushing) what->FlushTurn();
  flushing.clear();
  // Keep the capacity for the next turn: no allocation per turn.
  batch.pending.swap(flushing);
}

bool TurnBatch::Active() { return Current().depth > 0; }

bool TurnBatch::Defer(std::shared_ptr<TurnDeferred> what) {
  ThreadBatch& batch = Current();
  if (batch.depth == 0) return false;
  for (const auto& p : batch.pending) {
    if (p == what) return true;
  }
  batch.pending.push_back(std::move(what));
  return true;
}

}  // namespace rdmad::runtime
