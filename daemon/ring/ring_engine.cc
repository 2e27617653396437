#include "daemon/ring/ring_engine.h"

#include <sys/epoll.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/ring/ring_decoder.h"
#include "spdlog/spdlog.h"

namespace rdmad::ring {

RingEngine::RingEngine(runtime::EventLoop* loop,
                       core::TransferEngine* transfers)
    : loop_(loop), transfers_(transfers) {}

RingEngine::~RingEngine() = default;

void RingEngine::Attach(std::shared_ptr<RingQueue> queue) {
  loop_->Post([this, queue = std::move(queue)]() mutable {
    if (!registered_) {
      loop_->AddPoller(this);
      registered_ = true;
    }
    Attached a;
    RingQueue* raw = queue.get();
    auto watch = loop_->Watch(queue->doorbell_fd(), EPOLLIN,
                              [raw](uint32_t) { raw->ClearDoorbell(); });
    if (!watch.ok()) {
      queue->Stop(absl::InternalError(absl::StrCat(
          "cannot watch the queue's doorbell: ", watch.status().message())));
      return;
    }
    a.doorbell_watch = *watch;
    a.queue = std::move(queue);
    queues_.push_back(std::move(a));
  });
}

void RingEngine::Detach(uint64_t queue_id) {
  loop_->Post([this, queue_id] {
    for (auto it = queues_.begin(); it != queues_.end(); ++it) {
      if (it->queue->id() == queue_id) {
        loop_->Unwatch(it->doorbell_watch);
        queues_.erase(it);
        return;
      }
    }
  });
}

void RingEngine::Shutdown() {
  absl::Status s = runtime::RunOnLoop(loop_, [this]() -> absl::Status {
    for (Attached& a : queues_) loop_->Unwatch(a.doorbell_watch);
    queues_.clear();
    if (registered_) loop_->RemovePoller(this);
    registered_ = false;
    return absl::OkStatus();
  });
  if (!s.ok() && !absl::IsFailedPrecondition(s)) {
    spdlog::error("ring engine on {}: {}", loop_->name(), s.ToString());
  }
}

bool RingEngine::Serve(const std::shared_ptr<RingQueue>& queue) {
  queue::SubmissionEntry entries[kRoundBudget];
  const size_t n = queue->Take(absl::MakeSpan(entries));
  if (n == 0) return false;
  const absl::Time now = absl::Now();
  std::vector<core::TransferRequest> batch;
  batch.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t tag = entries[i].tag;
    absl::StatusOr<core::TransferSpec> spec = DecodeSubmission(
        entries[i], *queue->handles(), now, queue->default_timeout());
    if (!spec.ok()) {
      queue->Complete(tag, spec.status(), 0, core::TransportKind::kNone);
      continue;
    }
    batch.push_back(
        {*std::move(spec),
         [queue, tag](absl::StatusOr<core::TransferResult> result) {
           if (result.ok()) {
             queue->Complete(tag, absl::OkStatus(), result->bytes,
                             result->transport, result->latency);
           } else {
             queue->Complete(tag, result.status(), 0,
                             core::TransportKind::kNone);
           }
         }});
  }
  if (!batch.empty()) {
    transfers_->SubmitBatch(queue->caller(), absl::MakeSpan(batch));
  }
  return true;
}

bool RingEngine::Poll() {
  bool work = false;
  // By index: a completion run inline never detaches, but stay safe.
  for (size_t i = 0; i < queues_.size(); ++i) {
    std::shared_ptr<RingQueue> queue = queues_[i].queue;
    work |= Serve(queue);
  }
  return work;
}

bool RingEngine::PrepareToSleep() {
  bool work = false;
  for (const Attached& a : queues_) work |= a.queue->SleepUnlessWork();
  if (work) Woke();
  return work;
}

void RingEngine::Woke() {
  for (const Attached& a : queues_) a.queue->Awake();
}

}  // namespace rdmad::ring
