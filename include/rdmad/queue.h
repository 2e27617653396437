// rdmad queues: the fast, asynchronous data path
// ----------------------------------------------
//
// A Queue is a pair of rings in memory this process shares with the rdmad
// daemon: operations go on the submission ring and their results come back
// on the completion ring, with no system call on either side while both are
// busy (the daemon's engine polls the ring; it is woken only when it went
// to sleep, and this process sleeps only in Wait). Open one queue per
// thread that submits; a Queue is not thread-safe: two threads calling it
// at once lose completions without an error (serialize every call with one
// lock if a queue must be shared). A Queue may outlive the Client that
// opened it: it keeps the Client's session open until it is destroyed
// (the Client's Buffers must still go before the Client, see client.h).
//
// Remote regions are opened once (Client::OpenRemote) and named by their
// handle on the ring; the daemon re-resolves a region opened by name after
// it is re-exported or its daemon restarts.
//
// Example:
//
//   auto client = rdmad::Client::Connect();
//   if (!client.ok()) return client.status();
//   auto queue = (*client)->OpenQueue();
//   if (!queue.ok()) return queue.status();
//   auto kv = (*client)->OpenRemote(
//       *rdmad::RemoteRegion::Parse("10.0.0.2:7471/kv"));
//   if (!kv.ok()) return kv.status();
//   auto buf = (*client)->Allocate(1 << 20);
//   if (!buf.ok()) return buf.status();
//   std::vector<rdmad::Op> ops;
//   for (uint64_t i = 0; i < 16; ++i) {
//     ops.push_back({.kind = rdmad::Op::Kind::kWrite, .local = &*buf,
//                    .local_offset = i * 4096, .remote = &*kv,
//                    .remote_offset = i * 4096, .length = 4096, .tag = i});
//   }
//   // Run: submit what fits, wait, poll, until all are done. For more
//   // control, Submit(ops) queues what fits and returns how many, Wait
//   // sleeps until a completion is ready, and Poll takes completions.
//   auto done = (*queue)->Run(ops);  // done[i] belongs to ops[i]
//   if (!done.ok()) return done.status();  // the first op that failed
#ifndef RDMAD_QUEUE_H_
#define RDMAD_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "rdmad/info.h"

namespace rdmad {

class Buffer;
class Client;
struct RemoteRegion;         // rdmad/client.h
namespace client_internal {  // the library's internals (client/)
class SharedQueue;
struct RpcPath;
}  // namespace client_internal

// A region on another daemon (or this one) opened for queue operations
// (Client::OpenRemote). A copyable value; what it says is what the daemon
// answered, and only Client::OpenRemote makes one that names a region. It
// belongs to the client session that opened it: after the daemon
// restarted, open it again.
class RemoteHandle {
 public:
  RemoteHandle() = default;

  // The daemon's id of the handle, as the ring names it; 0 for none.
  uint64_t id() const { return id_; }
  // Bytes of the region when it was opened.
  uint64_t size() const { return size_; }
  // What its export grants; for a region of this daemon, what this
  // process may do with it (its mode, or the export).
  Access access() const { return access_; }
  Transport transport() const { return transport_; }  // kLocal: this daemon's
  const std::string& peer() const { return peer_; }   // "HOST:PORT"; "" here
  const std::string& name() const { return name_; }   // its name, if any

 private:
  friend class Client;
  friend class Queue;
  friend class client_internal::SharedQueue;

  uint64_t id_ = 0;
  uint64_t size_ = 0;
  Access access_ = Access::kNone;
  Transport transport_ = Transport::kNone;
  std::string peer_;
  std::string name_;
  // The client session it was opened in: ids of another session name
  // other handles.
  uint64_t session_generation_ = 0;
};

// QueueOptions::spin: the default, and the longest accepted.
inline constexpr absl::Duration kDefaultQueueSpin = absl::Microseconds(30);
inline constexpr absl::Duration kMaxQueueSpin = absl::Seconds(1);

struct QueueOptions {
  // Submission ring entries (rounded up to a power of two, 8..65536).
  uint32_t depth = 256;
  // Completion ring entries; 0 = twice `depth`. At most this many
  // operations are in flight at once.
  uint32_t completion_depth = 0;
  // Timeout of operations that set none: more than 0 (OpenQueue refuses
  // 0 or less), at most an hour (longer is an hour).
  absl::Duration default_timeout = absl::Seconds(30);
  // Also deliver notifications on this queue: of WRITEs with an immediate
  // into this session's buffers, and into every daemon-owned region
  // (Client::CreateRegion, `rdmactl alloc`) of this process's uid. One
  // queue per session may; a daemon-owned region's notifications go to
  // every notification queue of its owner's uid (each process of the user
  // that opened one gets each of them), whoever wrote (another uid with
  // the region's mode, another node with its export).
  //
  // Notifications share the completion ring with this queue's own
  // completions but never take the half of it those need: a writer
  // cannot slow or stop this queue's operations. A receiver that does not
  // poll loses nothing at first: the daemon holds what does not fit (in
  // order, after what is on the ring) and delivers it as Poll frees room,
  // and holds what comes while the user has no notification queue open
  // (the first one opened gets it). It holds at most the daemon's
  // notification_backlog (default 16384) per uid; past that a
  // notification is lost, and a Completion of kind kNotificationsLost
  // takes its place, in order, saying how many. Nothing is lost silently,
  // and a notification never stops the queue.
  bool notifications = false;
  // How long Wait busy-polls the completion ring before it sleeps on the
  // wake-up eventfd, while the daemon's engine runs on another CPU (on
  // this one spinning would only keep the engine from running). Sleeping
  // costs a wake-up per completion: raise it where completions are
  // usually further away than that and a core may be spent on waiting;
  // 0 never spins. At most kMaxQueueSpin.
  absl::Duration spin = kDefaultQueueSpin;
  // Whether Wait spins also after its thread was preempted. By default a
  // thread that was preempted (another thread wants its CPU) sleeps at
  // once for a while, as its spin would only delay the threads it waits
  // for. True for a thread with a CPU to itself, and on soft-RoCE (rxe),
  // whose kernel threads preempt the waiter with the very work it waits
  // for. (The daemon's engine has the same setting:
  // engine_spin_when_preempted.)
  bool spin_when_preempted = false;
};

// One one-sided operation: for a Queue (Submit, Run) and for
// Client::Write, Read and Batch. WRITE: `length` bytes from `local` at
// `local_offset` to the remote region at `remote_offset`; READ: the other
// way. A plain value of borrowed pointers: what they point to must outlive
// the call that takes the op (for Submit: until its completion is polled).
struct Op {
  // The remote region: a handle from Client::OpenRemote (the only kind a
  // Queue takes: the ring names regions by handle), or a RemoteRegion by
  // name or descriptor, which Client::Write, Read and Batch open for you
  // (once per region; its `offset` is added to `remote_offset`).
  using Remote = std::variant<const RemoteHandle*, const RemoteRegion*>;

  enum class Kind { kWrite, kRead } kind = Kind::kWrite;
  const Buffer* local = nullptr;  // Not owned; a buffer of the same Client.
  uint64_t local_offset = 0;
  Remote remote;  // Not owned.
  uint64_t remote_offset = 0;
  uint64_t length = 0;
  uint64_t tag = 0;  // yours; comes back in the completion
  // WRITE only: the owner of the target region is told (region, offset,
  // length, immediate, and who wrote) on its notification queues (see
  // QueueOptions::notifications). The WRITE completes OK once the data is
  // in place: telling the owner is the daemons' job from then on, whatever
  // room its queue has. The owner is told at most once: such a WRITE is
  // not retried when the connection to the peer is lost under it
  // (UNAVAILABLE then says the notification is in doubt).
  std::optional<uint32_t> immediate;
  // 0 (or less): the queue's default (for Client::Write, Read and Batch:
  // what is left of the call's timeout). Rounded up to milliseconds, at most
  // an hour. When it passes, the op completes DEADLINE_EXCEEDED with its
  // tag, and its local buffer is no longer written.
  absl::Duration timeout = absl::ZeroDuration();
};

// The result of an operation (Queue::Poll and Run, Client::Write, Read
// and Batch), or a notification (Queue::Poll on a queue that takes them).
struct Completion {
  enum class Kind {
    kCompletion,
    kNotification,
    // Notifications that were lost here (the daemon's backlog for this
    // user was full): `lost` says how many.
    kNotificationsLost,
  } kind = Kind::kCompletion;
  // kCompletion: the operation's tag, its status, the bytes it moved and
  // how; daemon_time is how long the daemon worked on it.
  uint64_t tag = 0;
  absl::Status status;
  uint64_t bytes = 0;
  Transport transport = Transport::kNone;
  absl::Duration daemon_time;
  // kNotification: someone wrote [offset, offset+bytes) of `region` (a
  // region id: of this session's buffer, or of a daemon-owned region of
  // this uid) with `immediate`, over `transport` (kLocal: a process on
  // this node).
  uint64_t region = 0;
  uint64_t offset = 0;
  uint32_t immediate = 0;
  // kNotification: who wrote. `writer` is the writing daemon's Peer
  // address ("HOST:PORT"; this daemon's own for a local writer), as that
  // daemon named itself (see docs/SECURITY.md for what it proves; from a
  // daemon too old to name itself, the IP address it connected from).
  // `writer_uid` is a local writer's uid, as the kernel told the daemon;
  // none for a remote writer.
  std::string writer;
  std::optional<uint32_t> writer_uid;
  // kNotificationsLost: how many notifications were lost at this point.
  uint64_t lost = 0;
};

class Queue {
 public:
  ~Queue();  // closes the queue in the daemon and unmaps it
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // Puts as many of `ops` on the submission ring as fit, in order, and
  // rings the doorbell if the daemon's engine sleeps. Returns how many were
  // queued (fewer than ops.size() when the ring is full: Poll some
  // completions and submit the rest; 0 for an empty span), or
  // RESOURCE_EXHAUSTED when not even the first fits (the submission ring
  // is full, or completion_depth operations are in flight); UNAVAILABLE
  // then instead when the daemon died without stopping the queue (Submit
  // does not look for that on every call: until the ring is full it
  // queues into it, and status() tells at once).
  // INVALID_ARGUMENT, before anything is queued, for an op without a buffer
  // of this client or a handle (the message names the op and its tag);
  // the queue's status once the daemon stopped it. Everything else
  // (lengths, ranges, rights) the daemon checks and reports in the op's
  // completion.
  absl::StatusOr<size_t> Submit(absl::Span<const Op> ops);

  // Runs all of `ops` and returns their completions, result i for ops[i]
  // (with ops[i]'s tag): submits what fits, waits, polls, and repeats
  // until every operation completed. Any number of ops, whatever the
  // queue's depth. If one fails, Run submits no more, waits for those in
  // flight, and returns the status of the first failed op in `ops` order,
  // its message prefixed with the op's index and tag; a refusal of Submit
  // (see there) is returned the same way. The queue must have nothing in
  // flight when Run starts (FAILED_PRECONDITION: Poll what earlier Submits
  // left), as Run tells its completions by tag. Notifications that arrive
  // meanwhile are kept for the next Poll. Each wait ends at `deadline`, or
  // when no operation completed for longer than the longest op timeout
  // (or the queue's default) plus 5 s (DEADLINE_EXCEEDED: the daemon did
  // not report them; they may still be in flight).
  absl::StatusOr<std::vector<Completion>> Run(
      absl::Span<const Op> ops, absl::Time deadline = absl::InfiniteFuture());

  // Moves completions that are ready into `out`; returns how many.
  size_t Poll(absl::Span<Completion> out);

  // Waits until Poll has something to return, the queue stopped, or
  // `deadline` (DEADLINE_EXCEEDED). Busy-polls briefly before it sleeps.
  // FAILED_PRECONDITION at once when nothing is in flight (and the queue
  // takes no notifications): nothing could end the wait but the deadline.
  absl::Status Wait(absl::Time deadline);
  // The same for at most `timeout` from now. Reads the clock only once the
  // completion is slow to come (after a few polls), so a caller that waits
  // once per operation saves a clock read per operation.
  absl::Status Wait(absl::Duration timeout);

  // For epoll/asyncio: Arm() asks the daemon to make event_fd() readable
  // at the next completion; it returns false when completions are ready
  // already (Poll them, then arm again), and when nothing will make the fd
  // readable: the queue stopped or its daemon is gone (Poll what is left;
  // status() then says why). After the fd was readable, read its 8-byte
  // counter and Poll.
  bool Arm();
  int event_fd() const;

  // OK while the daemon serves the queue; else why it stopped.
  // FAILED_PRECONDITION once this Client's session was opened again after
  // a restart of the local daemon: the queue belonged to the session
  // before (open a new one, and open remote handles again). UNAVAILABLE
  // when the daemon died without stopping it (one poll(2) finds out).
  absl::Status status() const;
  uint64_t id() const;
  // Operations submitted and not polled yet.
  uint32_t in_flight() const;
  uint32_t depth() const;

 private:
  friend class Client;
  friend class client_internal::SharedQueue;
  struct Impl;
  explicit Queue(std::unique_ptr<Impl> impl);
  absl::Status WaitUntil(absl::Time deadline, absl::Duration timeout);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rdmad

#endif  // RDMAD_QUEUE_H_
