#include "client/shared_queue.h"

#include <algorithm>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "client/client_impl.h"
#include "client/queue_impl.h"

namespace rdmad::client_internal {
namespace {

// Extra time past an operation's own deadline to wait for the daemon to
// report it (it fails the operation at the deadline, and says so).
constexpr absl::Duration kReportGrace = absl::Seconds(5);
// How long one waiting thread sleeps before it lets another look.
constexpr absl::Duration kWaitSlice = absl::Milliseconds(100);

std::string KeyOf(const RemoteRegion& remote) {
  return remote.descriptor.empty() ? absl::StrCat(remote.peer, "/", remote.name)
                                   : remote.descriptor;
}

}  // namespace

absl::Status SharedQueue::EnsureQueue() {
  // Usable() (status() without its poll(2): Client::Run has just looked at
  // the session) also fails once the client's session changed (the daemon
  // restarted): the old queue is dead, open one in the new session.
  if (queue_ != nullptr && queue_->impl_->Usable().ok()) {
    return absl::OkStatus();
  }
  queue_.reset();
  {
    // Nothing of the old queue will be polled again.
    absl::MutexLock lock(&results_mu_);
    abandoned_.clear();
  }
  auto queue = client_->OpenQueue(
      QueueOptions{.depth = 256, .spin = client_->options().queue_spin});
  if (!queue.ok()) return queue.status();
  queue_ = *std::move(queue);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const RemoteHandle>> SharedQueue::HandleFor(
    const RemoteRegion& remote) {
  const std::string key = KeyOf(remote);
  {
    absl::MutexLock lock(&handles_mu_);
    auto it = handles_.find(key);
    // A handle of the session before a daemon restart names nothing (or
    // something else) now: open it again.
    if (it != handles_.end() &&
        it->second->session_generation_ == client_->impl_->link->generation()) {
      return it->second;
    }
  }
  RemoteRegion bare = remote;
  bare.offset = 0;
  auto opened = client_->OpenRemote(bare);
  if (!opened.ok()) return opened.status();
  auto handle = std::make_shared<const RemoteHandle>(*std::move(opened));
  std::shared_ptr<const RemoteHandle> old;
  {
    absl::MutexLock lock(&handles_mu_);
    auto& slot = handles_[key];
    old = std::exchange(slot, handle);
  }
  if (old != nullptr && old->id_ != handle->id_) {
    (void)client_->CloseRemote(*old);
  }
  return handle;
}

absl::StatusOr<std::vector<Completion>> SharedQueue::Run(
    absl::Span<const Op> requests, absl::Duration timeout) {
  const size_t n = requests.size();
  std::vector<Completion> results(n);
  // Handles opened here keep the ops' remote pointers valid while they run.
  std::vector<std::shared_ptr<const RemoteHandle>> opened(n);
  std::vector<Op> ops;
  std::vector<size_t> index;
  const uint64_t generation = client_->impl_->link->generation();
  for (size_t i = 0; i < n; ++i) {
    Op op = requests[i];
    results[i].tag = op.tag;
    if (std::holds_alternative<const RemoteRegion*>(op.remote)) {
      // Copied out: assigning the handle below replaces the variant's value.
      const RemoteRegion* const region = std::get<const RemoteRegion*>(op.remote);
      auto handle = HandleFor(*region);
      if (!handle.ok()) {
        results[i].status = handle.status();
        continue;
      }
      opened[i] = *std::move(handle);
      op.remote = opened[i].get();
      op.remote_offset += region->offset;
    } else if (std::get<const RemoteHandle*>(op.remote)->session_generation_ !=
               generation) {
      // Submit would refuse the whole batch for it: it fails alone.
      results[i].status = absl::FailedPreconditionError(absl::StrCat(
          "remote handle ", std::get<const RemoteHandle*>(op.remote)->id_,
          " was opened in another session of this client (rdmad restarted "
          "since): open it again"));
      continue;
    }
    // Never past the call's own deadline.
    op.timeout = op.timeout > absl::ZeroDuration()
                     ? std::min(op.timeout, timeout)
                     : timeout;
    ops.push_back(op);
    index.push_back(i);
  }
  if (ops.empty()) return results;
  auto outcomes = Execute(ops, absl::Now() + timeout + kReportGrace);
  if (!outcomes.ok()) return outcomes.status();
  for (size_t k = 0; k < ops.size(); ++k) {
    Completion& done = results[index[k]];
    const uint64_t tag = done.tag;
    done = std::move((*outcomes)[k]);
    done.tag = tag;
  }
  return results;
}

absl::StatusOr<std::vector<Completion>> SharedQueue::Execute(
    std::vector<Op>& ops, absl::Time deadline) {
  const size_t n = ops.size();
  std::vector<Completion> out(n);
  size_t submitted = 0;
  size_t awaited = 0;
  size_t end = n;  // ops from here on failed to submit
  // Gives up on the ops submitted and not awaited yet.
  const auto give_up = [&](absl::Status why) {
    Abandon(ops, awaited, submitted);
    return why;
  };
  while (awaited < end) {
    size_t taken = 0;
    if (submitted < end) {
      absl::MutexLock lock(&submit_mu_);
      if (absl::Status s = EnsureQueue(); !s.ok()) return give_up(s);
      for (size_t i = submitted; i < n; ++i) ops[i].tag = next_tag_ + (i - submitted);
      auto queued = queue_->Submit(absl::MakeSpan(ops).subspan(submitted));
      if (queued.ok()) {
        taken = *queued;
        next_tag_ += taken;
      } else if (!absl::IsResourceExhausted(queued.status())) {
        for (size_t i = submitted; i < n; ++i) out[i].status = queued.status();
        end = submitted;
      }
      submitted += taken;
    }
    if (awaited < submitted) {
      auto outcome = Await(ops[awaited].tag, deadline);
      if (!outcome.ok()) return give_up(outcome.status());
      out[awaited++] = *std::move(outcome);
    } else if (awaited >= end) {
      break;
    } else if (taken == 0) {
      // The ring is full of other threads' operations: let them finish.
      if (absl::Now() >= deadline) {
        return give_up(absl::DeadlineExceededError(
            "the client's queue stayed full until the deadline"));
      }
      absl::MutexLock lock(&results_mu_);
      results_cv_.WaitWithTimeout(&results_mu_, absl::Milliseconds(1));
    }
  }
  return out;
}

absl::StatusOr<Completion> SharedQueue::Await(uint64_t tag,
                                              absl::Time deadline) {
  absl::MutexLock lock(&results_mu_);
  for (;;) {
    auto it = results_.find(tag);
    if (it != results_.end()) {
      Completion o = std::move(it->second);
      results_.erase(it);
      return o;
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          "rdmad did not report the operation in time: is the daemon "
          "overloaded or stuck?");
    }
    if (polling_) {
      results_cv_.WaitWithDeadline(&results_mu_, deadline);
      continue;
    }
    // This thread polls for everyone until it has news.
    polling_ = true;
    results_mu_.Unlock();
    std::shared_ptr<Queue> queue;
    {
      absl::MutexLock submit(&submit_mu_);
      queue = queue_;
    }
    absl::Status waited = queue == nullptr
                              ? absl::UnavailableError("the queue is gone")
                              : queue->WaitUntil(
                                    std::min(deadline, absl::Now() + kWaitSlice),
                                    absl::ZeroDuration());
    Completion done[64];
    size_t got = 0;
    if (queue != nullptr) {
      absl::MutexLock submit(&submit_mu_);
      if (queue_ == queue) got = queue->Poll(absl::MakeSpan(done));
    }
    results_mu_.Lock();
    polling_ = false;
    for (size_t i = 0; i < got; ++i) {
      if (done[i].kind != Completion::Kind::kCompletion) continue;
      if (abandoned_.erase(done[i].tag) > 0) continue;
      results_[done[i].tag] = std::move(done[i]);
    }
    results_cv_.SignalAll();
    if (!waited.ok() && !absl::IsDeadlineExceeded(waited) && got == 0) {
      // The queue stopped (the daemon restarted or shuts down).
      return waited;
    }
  }
}

void SharedQueue::Abandon(const std::vector<Op>& ops, size_t from,
                          size_t to) {
  absl::MutexLock lock(&results_mu_);
  for (size_t i = from; i < to && i < ops.size(); ++i) {
    // Already here: drop it now; else when it comes.
    if (results_.erase(ops[i].tag) == 0) abandoned_.insert(ops[i].tag);
  }
}

size_t SharedQueue::KeptForTest() {
  absl::MutexLock lock(&results_mu_);
  return results_.size() + abandoned_.size();
}

}  // namespace rdmad::client_internal
