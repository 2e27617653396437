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
#include <variant>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "client/buffer_impl.h"
#include "client/client_impl.h"
#include "client/queue_impl.h"
#include "common/queue_layout.h"
#include "common/spin_gate.h"
#include "rdmad/client.h"

namespace rdmad {
namespace {

Transport TransportOf(uint8_t code) {
  switch (queue::CompletionTransportOf(code)) {
    case queue::CompletionTransport::kVerbs:
      return Transport::kVerbs;
    case queue::CompletionTransport::kTcp:
      return Transport::kTcp;
    case queue::CompletionTransport::kLocal:
      return Transport::kLocal;
    case queue::CompletionTransport::kUnknown:
      break;
  }
  return Transport::kNone;
}

// Extra time past an operation's own timeout that Run waits for the
// daemon to report it (it fails the operation at its timeout, and says so).
constexpr absl::Duration kReportGrace = absl::Seconds(5);

// The session of a daemon that died without stopping the queue.
absl::Status SessionGone(uint64_t queue_id) {
  return absl::UnavailableError(absl::StrCat(
      "rdmad closed this client's session (it stopped or restarted): "
      "queue ", queue_id, " is gone: open a new queue (Client::OpenQueue) "
      "and open remote handles again; the Client opens a new session by "
      "itself"));
}

}  // namespace

Queue::Impl::Impl(Client* c, std::shared_ptr<client_internal::SessionLink> l,
                  uint64_t queue_id, uint64_t session_generation, void* mapping,
                  size_t size, UniqueFd doorbell_fd, UniqueFd wakeup_fd,
                  absl::Duration spin_time, absl::Duration default_op_timeout)
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
      spin(spin_time),
      default_timeout(default_op_timeout) {}

Queue::Impl::~Impl() {
  if (base != nullptr) ::munmap(base, mapped);
}

Queue::Queue(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Queue::~Queue() {
  // Only in its own session: a queue of a session before a daemon restart
  // is gone with it, and its id may name another queue of the new one.
  if (impl_ != nullptr) {
    (void)client_internal::CloseQueueIn(*impl_->link, impl_->id,
                                        impl_->generation);
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

absl::Status Queue::Impl::Check(absl::Span<const Op> ops) const {
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
    const Buffer::Impl* const local =
        op.local != nullptr ? op.local->impl_.get() : nullptr;
    if (local == nullptr || local->client != client) {
      return refuse(absl::StatusCode::kInvalidArgument,
                    op.local == nullptr
                        ? "it has no local buffer"
                        : "its local buffer was released or moved from, or "
                          "belongs to another Client",
                    ": name a live Buffer of the Client that opened this "
                    "queue");
    }
    const RemoteHandle* const* handle =
        std::get_if<const RemoteHandle*>(&op.remote);
    if (handle == nullptr) {
      return refuse(absl::StatusCode::kInvalidArgument,
                    "it names its remote region by RemoteRegion: a queue "
                    "takes a RemoteHandle (Client::OpenRemote); "
                    "Client::Batch takes either");
    }
    if (*handle == nullptr || (*handle)->id_ == 0) {
      return refuse(absl::StatusCode::kInvalidArgument,
                    "it names no remote handle (Client::OpenRemote)");
    }
    // Ids of another session (before a daemon restart) would name other
    // regions or handles in this one.
    if (local->generation != generation) {
      return refuse(absl::StatusCode::kFailedPrecondition, "buffer #",
                    local->id,
                    " belongs to this client's session before rdmad "
                    "restarted: allocate a new buffer (or map the named "
                    "region again)");
    }
    if ((*handle)->session_generation_ != generation) {
      return refuse(absl::StatusCode::kFailedPrecondition, "remote handle ",
                    (*handle)->id_,
                    " was opened in another session of this client (rdmad "
                    "restarted since): open it again");
    }
    if (op.immediate.has_value() && op.kind != Op::Kind::kWrite) {
      return refuse(absl::StatusCode::kInvalidArgument,
                    "only a WRITE can carry an immediate");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> Queue::Impl::Enqueue(
    absl::Span<const Op> ops, std::optional<uint64_t> first_index) {
  // Completions must have room: never more in flight than the ring holds.
  const uint32_t room =
      std::min(submissions.Space(static_cast<uint32_t>(
                   std::min<size_t>(ops.size(), queue::kMaxEntries))),
               completion_depth - std::min(completion_depth, in_flight));
  const size_t n = std::min<size_t>(room, ops.size());
  if (n == 0 && !ops.empty()) {
    // A daemon killed outright consumes nothing: its ring fills up, and
    // "Poll completions first" would send the caller waiting for ones that
    // never come. Looked at only here (a poll(2)), not on every Submit.
    if (link->DaemonClosed()) return SessionGone(id);
    return absl::ResourceExhaustedError(
        absl::StrCat("queue ", id, " is full (", in_flight,
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
    e.tag = first_index.has_value() ? *first_index + i : op.tag;
    e.local_region = op.local->impl_->id;
    e.local_offset = op.local_offset;
    e.remote_handle = (*std::get_if<const RemoteHandle*>(&op.remote))->id_;
    e.remote_offset = op.remote_offset;
    e.length = op.length;
    // No timeout (the queue's default) is the usual case, and needs no
    // conversion (a call into abseil's shared library).
    if (op.timeout != absl::ZeroDuration()) {
      e.timeout_ms = static_cast<uint32_t>(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(op.timeout + absl::Microseconds(999)), 0,
          int64_t{3600} * 1000));
    }
    submissions.Push(e);
  }
  in_flight += static_cast<uint32_t>(n);
  if (n > 0 && submissions.Publish()) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(doorbell.get(), &one, sizeof(one));
  }
  return n;
}

absl::StatusOr<size_t> Queue::Submit(absl::Span<const Op> ops) {
  if (absl::Status s = impl_->Usable(); !s.ok()) return s;
  if (absl::Status s = impl_->Check(ops); !s.ok()) return s;
  return impl_->Enqueue(ops, std::nullopt);
}

size_t Queue::Poll(absl::Span<Completion> out) {
  size_t taken = 0;
  while (!impl_->held.empty() && taken < out.size()) {
    out[taken++] = std::move(impl_->held.front());
    impl_->held.pop_front();
  }
  return taken + impl_->PollRing(out.subspan(taken));
}

size_t Queue::Impl::PollRing(absl::Span<Completion> out) {
  // What a forked child would take are the parent's completions.
  if (link->Forked()) return 0;
  queue::CompletionEntry entries[kPollChunk];
  size_t total = 0;
  while (total < out.size()) {
    const size_t want = std::min<size_t>(kPollChunk, out.size() - total);
    const size_t n = completions.Poll(absl::MakeSpan(entries, want), messages);
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
        c.transport = TransportOf(e.transport);
        c.writer = std::move(messages[i]);
        if (e.tag <= UINT32_MAX) c.writer_uid = static_cast<uint32_t>(e.tag);
        continue;
      }
      if (e.kind ==
          static_cast<uint8_t>(queue::CompletionKind::kNotificationsLost)) {
        c.kind = Completion::Kind::kNotificationsLost;
        c.lost = e.bytes;
        continue;
      }
      if (in_flight > 0) --in_flight;
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
  // Room was freed: notifications the daemon holds for it follow now
  // rather than at its engine's next look (queue_layout.h).
  if (total > 0 && queue::HeldNotificationsWantDoorbell(base)) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(doorbell.get(), &one, sizeof(one));
  }
  return total;
}

absl::StatusOr<std::vector<Completion>> Queue::Run(absl::Span<const Op> ops,
                                                   absl::Time deadline) {
  if (absl::Status s = impl_->Usable(); !s.ok()) return s;
  if (impl_->in_flight != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "queue ", impl_->id, " has ", impl_->in_flight,
        " operations in flight from earlier Submit calls: Poll their "
        "completions before Run (it tells its own apart by their tags)"));
  }
  if (absl::Status s = impl_->Check(ops); !s.ok()) return s;
  // How long the daemon may take to report an operation: its timeout (at
  // most an hour, as the daemon takes it), then a grace for the report.
  absl::Duration longest = impl_->default_timeout;
  for (const Op& op : ops) longest = std::max(longest, op.timeout);
  const absl::Duration patience =
      std::min(longest, absl::Hours(1)) + kReportGrace;

  std::vector<Completion> results(ops.size());
  size_t submitted = 0;
  size_t completed = 0;
  size_t end = ops.size();  // after a failure, nothing more is submitted
  size_t first_failed = ops.size();
  Completion polled[Impl::kPollChunk];
  while (completed < submitted || submitted < end) {
    if (submitted < end) {
      absl::Status usable = impl_->Usable();
      if (!usable.ok()) return usable;
      auto queued =
          impl_->Enqueue(ops.subspan(submitted, end - submitted), submitted);
      // Full (RESOURCE_EXHAUSTED): completions make room.
      if (!queued.ok() && !absl::IsResourceExhausted(queued.status())) {
        return queued.status();
      }
      if (queued.ok()) submitted += *queued;
    }
    const size_t got = impl_->PollRing(absl::MakeSpan(polled));
    if (got == 0) {
      // A timeout, not a deadline, when there is none: no clock reading
      // unless the completion is slow to come.
      absl::Status waited =
          deadline == absl::InfiniteFuture()
              ? WaitUntil(absl::InfinitePast(), patience)
              : WaitUntil(std::min(deadline, absl::Now() + patience),
                          absl::ZeroDuration());
      if (absl::IsDeadlineExceeded(waited)) {
        return absl::DeadlineExceededError(absl::StrCat(
            "queue ", impl_->id, ": ", submitted - completed, " of ",
            ops.size(), " operations still in flight ",
            absl::Now() >= deadline
                ? "at Run's deadline"
                : absl::StrCat("after ", absl::FormatDuration(patience),
                               " without a completion (their timeout and a "
                               "grace): is rdmad overloaded or stuck?")));
      }
      if (!waited.ok()) return waited;
      continue;
    }
    for (size_t i = 0; i < got; ++i) {
      Completion& c = polled[i];
      if (c.kind == Completion::Kind::kNotification) {
        impl_->held.push_back(std::move(c));
        continue;
      }
      if (c.tag >= submitted) {
        return absl::InternalError(absl::StrCat(
            "queue ", impl_->id, " returned a completion with tag ", c.tag,
            ", which Run did not give: was the queue used from another "
            "thread at the same time?"));
      }
      const size_t index = c.tag;
      c.tag = ops[index].tag;
      if (!c.status.ok()) {
        first_failed = std::min(first_failed, index);
        end = submitted;
      }
      results[index] = std::move(c);
      ++completed;
    }
  }
  if (first_failed < ops.size()) {
    const absl::Status& failed = results[first_failed].status;
    return absl::Status(failed.code(),
                        absl::StrCat("operation ", first_failed, " (tag ",
                                     ops[first_failed].tag, ") of ", ops.size(),
                                     ": ", failed.message()));
  }
  return results;
}

bool Queue::Arm() {
  // Run kept notifications for Poll: they are ready now.
  if (!impl_->held.empty()) return false;
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

absl::Status Queue::Impl::IdleWaitError() const {
  if (in_flight != 0 || notifications || !held.empty() ||
      !completions.Empty()) {
    return absl::OkStatus();
  }
  if (link->Forked()) return link->ForkedError();
  if (absl::Status s = Usable(); !s.ok()) return s;
  if (link->DaemonClosed()) return SessionGone(id);
  return absl::FailedPreconditionError(absl::StrCat(
      "nothing is in flight on queue ", id,
      ": Wait returns when a submitted operation completes, so Submit "
      "first (a queue opened with QueueOptions::notifications also waits "
      "for notifications)"));
}

absl::Status Queue::Wait(absl::Time deadline) {
  if (!impl_->held.empty()) return absl::OkStatus();
  if (absl::Status idle = impl_->IdleWaitError(); !idle.ok()) return idle;
  return WaitUntil(deadline, absl::ZeroDuration());
}

absl::Status Queue::Wait(absl::Duration timeout) {
  if (!impl_->held.empty()) return absl::OkStatus();
  if (absl::Status idle = impl_->IdleWaitError(); !idle.ok()) return idle;
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
  // Not while this thread shares its CPU with other runnable threads
  // (common/spin_gate.h): there, spinning only delays the engine and the
  // wake-up that ends the wait (unless QueueOptions::spin_when_preempted).
  // A plain spin consults the gate at its first clock reading (after
  // kPollsPerCheck polls), so that a completion already there costs no
  // clock reading; a yielding one reads the clock every turn anyway.
  thread_local SpinGate gate;
  bool spin = impl_->spin > absl::ZeroDuration();
  bool yield = false;
  if (spin && queue::EngineRunsHere(impl_->base)) {
    const absl::Time now = absl::Now();
    gate.Check(now);
    spin = yield = impl_->spin_when_preempted || gate.open(now);
  }
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
      YieldCpu();  // not a preemption (common/spin_gate.h)
    } else if (spin && ++polls % kPollsPerCheck != 0) {
      continue;
    }
    if (absl::Status s = impl_->Usable(); !s.ok()) return s;
    absl::Time now = absl::Now();
    if (!clock_read) {
      clock_read = true;
      if (deadline == absl::InfinitePast()) deadline = now + timeout;
      if (spin && !yield && !impl_->spin_when_preempted) {
        gate.Check(now);
        spin = gate.open(now);
      }
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
