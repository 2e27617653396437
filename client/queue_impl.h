// Internals of rdmad::Queue (include/rdmad/queue.h), shared by client.cc,
// which opens queues, and queue.cc. Not a public header.
#ifndef RDMAD_CLIENT_QUEUE_IMPL_H_
#define RDMAD_CLIENT_QUEUE_IMPL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "client/session_link.h"
#include "common/queue_ring.h"
#include "common/unique_fd.h"
#include "rdmad/queue.h"

namespace rdmad {

struct Queue::Impl {
  // Takes the mapping of the segment (munmapped on destruction) and the
  // two eventfds. The segment was checked (queue::CheckSegment).
  Impl(Client* client, std::shared_ptr<client_internal::SessionLink> link,
       uint64_t id,
       uint64_t generation, void* mapping, size_t size, UniqueFd doorbell,
       UniqueFd wakeup, absl::Duration spin);
  ~Impl();

  // What Queue::status() says but for a daemon killed outright, without a
  // system call (for Submit and Wait's loop): a forked child, a session
  // before a restart, or the daemon's stop status.
  absl::Status Usable() const;

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
  uint32_t in_flight = 0;  // submitted, completion not polled yet
  // Poll's scratch for error messages, kept from call to call: building 64
  // strings per Poll cost more than the rest of a small operation's Poll.
  static constexpr size_t kPollChunk = 64;
  std::string messages[kPollChunk];
};

// Closes queue `id` of session `generation` of `link`; nothing if that
// session is over (its queues went with it).
absl::Status CloseQueueIn(client_internal::SessionLink& link, uint64_t id,
                          uint64_t generation);

}  // namespace rdmad

#endif  // RDMAD_CLIENT_QUEUE_IMPL_H_
