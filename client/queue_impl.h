// Internals of rdmad::Queue (include/rdmad/queue.h), shared by client.cc,
// which opens queues, and queue.cc. Not a public header.
#ifndef RDMAD_CLIENT_QUEUE_IMPL_H_
#define RDMAD_CLIENT_QUEUE_IMPL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/session_link.h"
#include "common/queue_ring.h"
#include "common/unique_fd.h"
#include "rdmad/queue.h"

namespace rdmad {

// Hidden: librdmad_client.so exports Queue's members, not these.
struct __attribute__((visibility("hidden"))) Queue::Impl {
  // Takes the mapping of the segment (munmapped on destruction) and the
  // two eventfds. The segment was checked (queue::CheckSegment).
  Impl(Client* client, std::shared_ptr<client_internal::SessionLink> link,
       uint64_t id, uint64_t generation, void* mapping, size_t size,
       UniqueFd doorbell, UniqueFd wakeup, absl::Duration spin,
       absl::Duration default_timeout);
  ~Impl();

  // What Queue::status() says but for a daemon killed outright, without a
  // system call (for Submit and Wait's loop): a forked child, a session
  // before a restart, or the daemon's stop status.
  absl::Status Usable() const;
  // For the public Wait: an error when nothing could end a wait but its
  // deadline (nothing in flight, held or on the ring, no notifications
  // taken); OK otherwise. Reads what Submit and Poll write: the shared
  // queue of Client::Batch, whose waiter runs beside its submitters,
  // calls WaitUntil without it.
  absl::Status IdleWaitError() const;

  // What Submit checks of `ops` before it queues any (the daemon checks
  // every field again): INVALID_ARGUMENT or FAILED_PRECONDITION naming the
  // op by its index in `ops` and its tag.
  absl::Status Check(absl::Span<const Op> ops) const;
  // Queues as many of `ops` (checked) as the rings have room for and rings
  // the doorbell if the engine sleeps; returns how many, or why none (see
  // Queue::Submit). With `first_index`, op i goes with the tag
  // *first_index + i instead of its own (Queue::Run).
  absl::StatusOr<size_t> Enqueue(absl::Span<const Op> ops,
                                 std::optional<uint64_t> first_index);
  // Moves completions from the ring into `out` (not the held ones).
  size_t PollRing(absl::Span<Completion> out);

  // The Client that opened the queue, only to recognize its Buffers: it
  // may be gone (never dereferenced). Not owned.
  const Client* const client;
  // The Client's session, shared: the queue closes itself through it.
  const std::shared_ptr<client_internal::SessionLink> link;
  const uint64_t id;
  // The client session the queue was opened in; after a daemon restart the
  // client's session changes and the queue is dead.
  const uint64_t generation;
  void* const base;
  const size_t mapped;
  const UniqueFd doorbell;
  const UniqueFd wakeup;
  queue::SubmissionProducer submissions;
  queue::CompletionConsumer completions;
  const uint32_t depth;
  const uint32_t completion_depth;
  const absl::Duration spin;  // QueueOptions::spin
  bool spin_when_preempted = false;  // QueueOptions::spin_when_preempted
  // QueueOptions::default_timeout, at most an hour (as the daemon takes it).
  const absl::Duration default_timeout;
  uint32_t in_flight = 0;  // submitted, completion not polled yet
  // QueueOptions::notifications: something may arrive with nothing in
  // flight.
  bool notifications = false;
  // Notifications Run polled while it waited for its operations: Poll
  // returns them first.
  std::deque<Completion> held;
  // Poll's scratch for error messages, kept from call to call: building 64
  // strings per Poll cost more than the rest of a small operation's Poll.
  static constexpr size_t kPollChunk = 64;
  std::string messages[kPollChunk];
};

// Closes queue `id` of session `generation` of `link`; nothing if that
// session is over (its queues went with it).
namespace client_internal {
absl::Status CloseQueueIn(SessionLink& link, uint64_t id, uint64_t generation);
}  // namespace client_internal

}  // namespace rdmad

#endif  // RDMAD_CLIENT_QUEUE_IMPL_H_
