// Implementation of include/rdmad/queue.h: the client's ends of the two
// rings (common/queue_ring.h) over a segment mapped from the daemon.
#include "rdmad/queue.h"

#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "client/client_impl.h"
#include "client/queue_impl.h"
#include "common/queue_layout.h"
#include "rdmad/client.h"

namespace rdmad {
namespace {

Transport TransportOf(uint8_t code) {
  switch (code) {
    case 1:
      return Transport::kVerbs;
    case 2:
      return Transport::kTcp;
    case 3:
      return Transport::kLocal;
    default:
      return Transport::kNone;
  }
}

// The session of a daemon that died without stopping the queue.
absl::Status SessionGone(uint64_t queue_id) {
  return absl::UnavailableError(absl::StrCat(
      "rdmad closed this client's session (it stopped or restarted): "
      "queue ", queue_id, " is gone; the next call opens a new session"));
}

}  // namespace

Queue::Impl::Impl(Client* c, std::shared_ptr<client_internal::SessionLink> l,
                  uint64_t queue_id, uint64_t session_generation,
                  void* mapping, size_t size, UniqueFd doorbell_fd,
                  UniqueFd wakeup_fd, absl::Duration spin_time)
    : client(c),
      link(std::move(l)),
      id(queue_id),
      generation(session_generation),
      base(mapping),
      mapped(size),
      doorbell(std::move(doorbell_fd)),
      wakeup(std::move(wakeup_fd)),
      submissions(mapping),
      completions(mapping),
      depth(static_cast<queue::QueueHeader*>(mapping)->sq_entries),
      completion_depth(static_cast<queue::QueueHeader*>(mapping)->cq_entries),
      spin(spin_time) {}

Queue::Impl::~Impl() {
  if (base != nullptr) ::munmap(base, mapped);
}

Queue::Queue(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Queue::~Queue() {
  // Only in its own session: a queue of a session before a daemon restart
  // is gone with it, and its id may name another queue of the new one.
  if (impl_ != nullptr) {
    (void)CloseQueueIn(*impl_->link, impl_->id, impl_->generation);
  }
}

uint64_t Queue::id() const { return impl_->id; }
uint32_t Queue::depth() const { return impl_->depth; }
uint32_t Queue::in_flight() const { return impl_->in_flight; }
int Queue::event_fd() const { return impl_->wakeup.get(); }

absl::Status Queue::Impl::Usable() const {
  // The ring is the parent's, which still uses it.
  if (link->Forked()) return link->ForkedError();
  // First: a queue of a session before a restart may also say it was
  // stopped (the old daemon's last word), which tells less.
  if (generation != link->generation()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "queue ", id, " belonged to this client's session before "
        "rdmad restarted and is gone: open a new queue (and open remote "
        "handles again)"));
  }
  return queue::StopStatus(base);
}

absl::Status Queue::status() const {
  if (absl::Status s = impl_->Usable(); !s.ok()) return s;
  // A daemon killed outright never stopped the queue: its session socket
  // says so (one poll(2)).
  if (impl_->link->DaemonClosed()) return SessionGone(impl_->id);
  return absl::OkStatus();
}

absl::StatusOr<size_t> Queue::Submit(absl::Span<const Op> ops) {
  if (absl::Status s = impl_->Usable(); !s.ok()) return s;
  // Check what only this side can (the daemon checks every field again,
  // ranges and rights included), before anything is queued. Each refusal
  // names the op, by its place in `ops` and its tag.
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    auto refuse = [&](absl::StatusCode code, auto&&... what) {
      return absl::Status(
          code, absl::StrCat("operation ", i, " (tag ", op.tag, ") of ",
                             ops.size(), ", nothing queued: ", what...));
    };
    if (op.local == nullptr || op.local->client_ != impl_->client) {
      return refuse(absl::StatusCode::kInvalidArgument,
                    op.local == nullptr
                        ? "it has no local buffer"
                        : "its local buffer was released or moved from, or "
                          "belongs to another Client",
                    ": name a live Buffer of the Client that opened this "
                    "queue");
    }
    if (op.remote == nullptr || op.remote->id == 0) {
      return refuse(absl::StatusCode::kInvalidArgument,
                    "it names no remote handle (Client::OpenRemote)");
    }
    // Ids of another session (before a daemon restart) would name other
    // regions or handles in this one.
    if (op.local->generation_ != impl_->generation) {
      return refuse(absl::StatusCode::kFailedPrecondition, "buffer #",
                    op.local->id_,
                    " belongs to this client's session before rdmad "
                    "restarted: allocate a new buffer (or map the named "
                    "region again)");
    }
    if (op.remote->session_generation != impl_->generation) {
      return refuse(absl::StatusCode::kFailedPrecondition, "remote handle ",
                    op.remote->id,
                    " was opened in another session of this client (rdmad "
                    "restarted since): open it again");
    }
    if (op.immediate.has_value() && op.kind != Op::Kind::kWrite) {
      return refuse(absl::StatusCode::kInvalidArgument,
                    "only a WRITE can carry an immediate");
    }
  }
  // Completions must have room: never more in flight than the ring holds.
  const uint32_t room = std::min(
      impl_->submissions.Space(static_cast<uint32_t>(
          std::min<size_t>(ops.size(), queue::kMaxEntries))),
      impl_->completion_depth -
          std::min(impl_->completion_depth, impl_->in_flight));
  const size_t n = std::min<size_t>(room, ops.size());
  if (n == 0 && !ops.empty()) {
    // A daemon killed outright consumes nothing: its ring fills up, and
    // "Poll completions first" would send the caller waiting for ones that
    // never come. Looked at only here (a poll(2)), not on every Submit.
    if (impl_->link->DaemonClosed()) return SessionGone(impl_->id);
    return absl::ResourceExhaustedError(absl::StrCat(
        "queue ", impl_->id, " is full (", impl_->in_flight,
        " operations in flight): Poll completions first"));
  }
  for (size_t i = 0; i < n; ++i) {
    const Op& op = ops[i];
    queue::SubmissionEntry e{};
    e.op = static_cast<uint8_t>(op.kind == Op::Kind::kWrite
                                    ? queue::OpCode::kWrite
                                    : queue::OpCode::kRead);
    if (op.immediate.has_value()) {
      e.flags = queue::kFlagImmediate;
      e.immediate = *op.immediate;
    }
    e.tag = op.tag;
    e.local_region = op.local->id();
    e.local_offset = op.local_offset;
    e.remote_handle = op.remote->id;
    e.remote_offset = op.remote_offset;
    e.length = op.length;
    // No timeout (the queue's default) is the usual case, and needs no
    // conversion (a call into abseil's shared library).
    if (op.timeout != absl::ZeroDuration()) {
      e.timeout_ms = static_cast<uint32_t>(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(op.timeout + absl::Microseconds(999)), 0,
          int64_t{3600} * 1000));
    }
    impl_->submissions.Push(e);
  }
  impl_->in_flight += static_cast<uint32_t>(n);
  if (n > 0 && impl_->submissions.Publish()) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(impl_->doorbell.get(), &one, sizeof(one));
  }
  return n;
}

size_t Queue::Poll(absl::Span<Completion> out) {
  // What a forked child would take are the parent's completions.
  if (impl_->link->Forked()) return 0;
  queue::CompletionEntry entries[Impl::kPollChunk];
  std::string* const messages = impl_->messages;
  size_t total = 0;
  while (total < out.size()) {
    const size_t want = std::min<size_t>(Impl::kPollChunk, out.size() - total);
    const size_t n = impl_->completions.Poll(absl::MakeSpan(entries, want),
                                             messages);
    for (size_t i = 0; i < n; ++i) {
      const queue::CompletionEntry& e = entries[i];
      Completion& c = out[total + i];
      c = Completion();
      if (e.kind ==
          static_cast<uint8_t>(queue::CompletionKind::kNotification)) {
        c.kind = Completion::Kind::kNotification;
        c.region = e.region;
        c.offset = e.offset;
        c.bytes = e.bytes;
        c.immediate = e.immediate;
        continue;
      }
      if (impl_->in_flight > 0) --impl_->in_flight;
      c.tag = e.tag;
      c.bytes = e.bytes;
      c.transport = TransportOf(e.transport);
      c.daemon_time = absl::Nanoseconds(e.daemon_ns);
      if (e.code != 0) {
        const int code = e.code > 0 && e.code <= 16
                             ? e.code
                             : static_cast<int>(absl::StatusCode::kUnknown);
        c.status = absl::Status(static_cast<absl::StatusCode>(code),
                                messages[i]);
      }
    }
    total += n;
    if (n < want) break;
  }
  return total;
}

bool Queue::Arm() {
  // False sends the caller to Poll and status() also when nothing can ever
  // make the eventfd readable: a stopped queue (WaitUnlessReady says
  // ready), and a daemon that died without stopping it.
  if (!impl_->Usable().ok()) return false;
  if (impl_->completions.WaitUnlessReady()) return false;
  if (impl_->link->DaemonClosed()) {
    impl_->completions.Done();
    return false;
  }
  return true;
}

absl::Status Queue::Wait(absl::Time deadline) {
  return WaitUntil(deadline, absl::ZeroDuration());
}

absl::Status Queue::Wait(absl::Duration timeout) {
  return WaitUntil(absl::InfinitePast(), timeout);
}

// `deadline`, or when InfinitePast, `timeout` from the first clock reading
// (which comes after kPollsPerCheck polls while spinning).
absl::Status Queue::WaitUntil(absl::Time deadline, absl::Duration timeout) {
  // Completions on the ring would be the parent's.
  if (impl_->link->Forked()) return impl_->link->ForkedError();
  // Busy-polling helps only while the engine runs on another CPU: on ours
  // it would keep the engine from running until the spin runs out. There
  // the spin polls between sched_yield calls instead, which let the
  // engine run at once (it yields back once it completed our work), and
  // which keep this thread runnable: the scheduler moves one of two
  // runnable threads to an idle CPU, never a sleeper (queue_layout.h).
  const bool spin = impl_->spin > absl::ZeroDuration();
  const bool yield = spin && queue::EngineRunsHere(impl_->base);
  if (yield) {
    impl_->completions.Yielding();
  } else if (spin) {
    impl_->completions.NotWaiting();
  }
  // Yielding ends with the wait, however it ends. (On the engine's CPU
  // this store moves no cache line between cores.)
  absl::Cleanup stop_yielding = [this, yield] {
    if (yield) impl_->completions.NotWaiting();
  };
  // While busy-polling, the status and the clock are looked at every
  // kPollsPerCheck polls only: each costs as much as a poll (absl::Now most
  // of all), and the longer one turn of the loop, the later a completion is
  // seen. The spin's end is set at the first clock reading.
  constexpr uint32_t kPollsPerCheck = 16;
  uint32_t polls = 0;
  absl::Time spin_until = absl::InfinitePast();
  bool clock_read = false;
  while (impl_->completions.Empty()) {
    if (yield) {
      ::sched_yield();
    } else if (spin && ++polls % kPollsPerCheck != 0) {
      continue;
    }
    if (absl::Status s = impl_->Usable(); !s.ok()) return s;
    absl::Time now = absl::Now();
    if (!clock_read) {
      clock_read = true;
      if (deadline == absl::InfinitePast()) deadline = now + timeout;
      // A spin longer than the wait ends at the deadline.
      if (spin) spin_until = std::min(now + impl_->spin, deadline);
    }
    if (now < spin_until) continue;
    if (impl_->completions.WaitUnlessReady()) break;
    now = absl::Now();
    if (now >= deadline) {
      impl_->completions.Done();
      return absl::DeadlineExceededError(absl::StrCat(
          "no completion on queue ", impl_->id, " before the deadline"));
    }
    pollfd p{impl_->wakeup.get(), POLLIN, 0};
    const int timeout_ms =
        deadline == absl::InfiniteFuture()
            ? 1000
            : static_cast<int>(std::min<int64_t>(
                  1000, absl::ToInt64Milliseconds(deadline - now) + 1));
    const int rc = ::poll(&p, 1, timeout_ms);
    impl_->completions.Done();
    if (rc > 0) {
      uint64_t count;
      [[maybe_unused]] ssize_t r = ::read(impl_->wakeup.get(), &count,
                                          sizeof(count));
    } else if (rc < 0 && errno != EINTR) {
      return absl::ErrnoToStatus(errno, "poll on the queue's wake-up eventfd");
    } else if (rc == 0 && impl_->link->DaemonClosed()) {
      // A daemon that died without stopping the queue never will: say so
      // instead of waiting for the deadline.
      return SessionGone(impl_->id);
    }
  }
  return absl::OkStatus();
}

}  // namespace rdmad
