#include "daemon/ring/ring_queue.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace rdmad::ring {
namespace {

absl::StatusOr<UniqueFd> NewEventFd() {
  UniqueFd fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, "eventfd");
  return fd;
}

uint8_t TransportCode(core::TransportKind kind) {
  switch (kind) {
    case core::TransportKind::kVerbs:
      return 1;
    case core::TransportKind::kTcp:
      return 2;
    case core::TransportKind::kLocal:
      return 3;
    case core::TransportKind::kNone:
      break;
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::shared_ptr<RingQueue>> RingQueue::Create(
    uint64_t id, const core::Caller& caller,
    std::shared_ptr<RemoteHandles> handles, const RingQueueOptions& options) {
  const queue::Geometry geometry = queue::GeometryFor(
      options.submission_entries, options.completion_entries);
  RDMAD_ASSIGN_OR_RETURN(
      core::ShmSegment segment,
      core::ShmSegment::Create(absl::StrCat("rdmad-queue-", id),
                               geometry.total_size));
  queue::InitializeSegment(segment.data(), geometry);
  RDMAD_ASSIGN_OR_RETURN(UniqueFd doorbell, NewEventFd());
  RDMAD_ASSIGN_OR_RETURN(UniqueFd wakeup, NewEventFd());
  return std::shared_ptr<RingQueue>(new RingQueue(
      id, caller, std::move(handles), options, geometry, std::move(segment),
      std::move(doorbell), std::move(wakeup)));
}

RingQueue::RingQueue(uint64_t id, const core::Caller& caller,
                     std::shared_ptr<RemoteHandles> handles,
                     RingQueueOptions options, queue::Geometry geometry,
                     core::ShmSegment segment, UniqueFd doorbell,
                     UniqueFd wakeup)
    : id_(id),
      caller_(caller),
      handles_(std::move(handles)),
      options_(options),
      geometry_(geometry),
      segment_(std::move(segment)),
      doorbell_(std::move(doorbell)),
      wakeup_(std::move(wakeup)),
      submissions_(segment_.data(), geometry_),
      completions_(segment_.data(), geometry_) {}

size_t RingQueue::Take(absl::Span<queue::SubmissionEntry> out) {
  if (stopped()) return 0;
  size_t room = 0;
  absl::Status bad;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<uint32_t> space = completions_.Space();
    if (space.ok()) {
      room = *space > in_flight_ ? *space - in_flight_ : 0;
    } else {
      bad = space.status();
    }
  }
  if (!bad.ok()) {
    Stop(bad);
    return 0;
  }
  if (room == 0) return 0;  // the client has not consumed its completions
  absl::StatusOr<size_t> taken =
      submissions_.Take(out.subspan(0, std::min(room, out.size())));
  if (!taken.ok()) {
    Stop(taken.status());
    return 0;
  }
  if (*taken > 0) {
    absl::MutexLock lock(&mu_);
    in_flight_ += static_cast<uint32_t>(*taken);
  }
  return *taken;
}

bool RingQueue::SleepUnlessWork() {
  return !stopped() && submissions_.SleepUnlessWork();
}

void RingQueue::Awake() { submissions_.Awake(); }

void RingQueue::ClearDoorbell() {
  uint64_t count;
  [[maybe_unused]] ssize_t n = ::read(doorbell_.get(), &count, sizeof(count));
}

void RingQueue::PublishLocked() {
  if (completions_.Publish()) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wakeup_.get(), &one, sizeof(one));
  }
}

void RingQueue::Complete(uint64_t tag, const absl::Status& status,
                         uint64_t bytes, core::TransportKind transport,
                         absl::Duration daemon_time) {
  absl::MutexLock lock(&mu_);
  if (in_flight_ > 0) --in_flight_;
  // The slot was reserved when the submission was taken; the client can
  // still have lied about its head since, which Space() catches.
  absl::StatusOr<uint32_t> space = completions_.Space();
  if (!space.ok() || *space == 0) return;
  queue::CompletionEntry entry{};
  entry.kind = static_cast<uint8_t>(queue::CompletionKind::kCompletion);
  entry.transport = TransportCode(transport);
  entry.code = static_cast<int32_t>(status.code());
  entry.tag = tag;
  entry.bytes = status.ok() ? bytes : 0;
  entry.daemon_ns =
      static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Nanoseconds(daemon_time)));
  completions_.Push(entry, status.message());
  PublishLocked();
}

void RingQueue::Notify(uint64_t region, uint64_t offset, uint64_t length,
                       uint32_t immediate) {
  if (stopped()) return;
  bool full = false;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<uint32_t> space = completions_.Space();
    // Slots reserved for submissions in flight are not ours to take.
    full = !space.ok() || *space <= in_flight_;
    if (!full) {
      queue::CompletionEntry entry{};
      entry.kind = static_cast<uint8_t>(queue::CompletionKind::kNotification);
      entry.region = region;
      entry.offset = offset;
      entry.bytes = length;
      entry.immediate = immediate;
      completions_.Push(entry, "");
      PublishLocked();
    }
  }
  if (full) {
    Stop(absl::ResourceExhaustedError(absl::StrCat(
        "notification queue ", id_,
        " overflowed: its completion ring had no room for a notification; "
        "poll it more often or open it with more completion entries")));
  }
}

void RingQueue::Stop(const absl::Status& why) {
  if (stopped_.exchange(true)) return;
  // Closed by its client, or with its session: nothing to warn about.
  if (absl::IsCancelled(why)) {
    spdlog::debug("queue {} of session {} closed: {}", id_,
                  caller_.session_id, std::string(why.message()));
  } else {
    spdlog::warn("queue {} of session {} stopped: {}", id_,
                 caller_.session_id, why.ToString());
  }
  queue::StopQueue(segment_.data(), why);
  // A client asleep on the queue learns it at once.
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wakeup_.get(), &one, sizeof(one));
}

}  // namespace rdmad::ring
