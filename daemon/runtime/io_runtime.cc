#include "daemon/runtime/io_runtime.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rdmad::runtime {

absl::StatusOr<std::unique_ptr<IoRuntime>> IoRuntime::Start(
    IoRuntimeOptions options) {
  const int engines = std::clamp(options.engine_threads, 1, 64);
  const int threads = std::clamp(options.threads, engines, 64);
  std::vector<std::unique_ptr<EventLoop>> loops;
  for (int i = 0; i < threads; ++i) {
    auto loop = EventLoop::Create(absl::StrCat(options.name, i), options.loop);
    if (!loop.ok()) return loop.status();
    loops.push_back(*std::move(loop));
  }
  for (auto& loop : loops) loop->Start();
  return std::unique_ptr<IoRuntime>(
      new IoRuntime(std::move(loops), static_cast<size_t>(engines)));
}

IoRuntime::~IoRuntime() { Stop(); }

EventLoop* IoRuntime::Pick() {
  return loops_[next_.fetch_add(1, std::memory_order_relaxed) % loops_.size()]
      .get();
}

EventLoop* IoRuntime::PickEngine() {
  return loops_[next_engine_.fetch_add(1, std::memory_order_relaxed) %
                engines_]
      .get();
}

EventLoop* IoRuntime::PickServing() {
  const size_t serving = loops_.size() - engines_;
  if (serving == 0) return PickEngine();
  return loops_[engines_ + next_serving_.fetch_add(
                               1, std::memory_order_relaxed) % serving]
      .get();
}

void IoRuntime::Stop() {
  for (auto& loop : loops_) loop->Stop();
}

}  // namespace rdmad::runtime
