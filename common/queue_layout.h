// The shared-memory queue between a client and the daemon: the layout of
// the segment both map, and the rules each side follows. The client library
// (client/queue.cc) and the daemon's ring engine (daemon/ring/) include it.
//
// A queue is one memfd the daemon creates and passes on the session socket,
// plus two eventfds (the doorbell: client -> daemon; the wake-up: daemon ->
// client). The segment holds:
//
//   offset 0             QueueHeader (one page): geometry, indices, flags
//   sq_offset            the submission ring: sq_entries x SubmissionEntry
//   cq_offset            the completion ring: cq_entries x CompletionEntry
//   errors_offset        cq_entries x ErrorSlot: the text of an entry
//                        (a failed op's message, a notification's
//                        writer), in the slot of its completion's position
//                        (so it cannot be overwritten before the client
//                        has consumed that completion)
//
// Both rings are single-producer single-consumer with free-running 32-bit
// positions (entry i lives at i & (entries - 1)):
//   submission ring  client writes entries and sq_tail; daemon writes sq_head
//   completion ring  daemon writes entries and cq_tail; client writes cq_head
// A producer writes the entry and last its `sequence`, position + 1, with
// release order: that publishes it. The consumer polls the sequence of the
// next slot with acquire order, copies the entry once it matches, then
// publishes the new head with release order (the producer reads it only
// when the room it saw last runs out). Polling the entry itself moves one
// cache line from core to core per operation each way (the operation is in
// the line that says it is there), where polling a separate tail would move
// two. The producer still publishes its tail after each batch, with
// sequentially consistent order: it carries the sleep/wake handshake below,
// and the consumer reads it only then, so while both sides are awake the
// tail's line stays with its writer.
//
// The daemon trusts nothing the client writes: it copies each submission
// entry before looking at it, validates it as the gRPC path validates a
// request, and checks the client's sequences and indices (sq_tail,
// cq_head) against the positions it keeps itself. A queue whose sequences
// or indices are impossible is stopped (state kStopped and a status in the
// header); nothing else is affected.
//
// Notifications (WRITEs with an immediate into the owner's regions) share
// the completion ring with the queue's own completions, but never the
// slots those need: the daemon puts a notification on the ring only while
// more than half of the ring stays free beside the completions of what is
// in flight, so a writer cannot take the ring from its owner's operations.
// What does not fit waits in the daemon (a bounded backlog per uid, in
// order) and follows as the client frees room; `notifications_held` says
// how many wait, and a client that frees room while it is not 0 and the
// engine sleeps rings the doorbell, so that the rest follows at once
// (otherwise within 10 ms). Notifications past the backlog's bound are
// counted, and the count comes in order as a kNotificationsLost entry: no
// notification is dropped unannounced, and none ever stops the queue.
//
// Waiting without burning CPU:
//   - the engine polls the submission rings while it has work, spins a
//     while after, then sets `engine_sleeping`, checks once more and sleeps.
//     A client that publishes sq_tail and then sees `engine_sleeping` rings
//     the doorbell (writes the doorbell eventfd);
//   - a client that wants to sleep sets `client_waiting`, checks the
//     completion ring once more and sleeps on the wake-up eventfd; the
//     daemon writes it after publishing completions while the flag is set.
//     (epoll/asyncio users arm the flag the same way: Queue::Arm.)
//   - each side says which CPU it runs on (`engine_cpu` always,
//     `client_cpu` while the client waits on one: asleep, or yielding; 0
//     while it busy-polls elsewhere). On one CPU a side that spins only
//     keeps the other from running until its spin runs out, and both
//     sides' spins add up to the latency of every operation. So a client
//     busy-polls only while the engine is on another CPU; on the engine's
//     CPU it polls between sched_yield calls for its spin time (and then
//     sleeps), and an engine that completes work for a client waiting on
//     its own CPU yields to it instead of spinning on.
//     Yielding rather than sleeping at once matters: the scheduler wakes
//     a sleeper on its waker's CPU, so a client and an engine that wake
//     each other stay together for good while another CPU idles (an
//     8-byte op took 8-10 us instead of 0.4). Two runnable threads on one
//     CPU are what the scheduler's load balancing moves apart.
#ifndef RDMAD_COMMON_QUEUE_LAYOUT_H_
#define RDMAD_COMMON_QUEUE_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rdmad::queue {

inline constexpr uint32_t kMagic = 0x51444d52;  // "RMDQ"
// 2: per-entry sequences; 3: notifications say who wrote, lost ones are
// counted on the ring, `notifications_held`.
inline constexpr uint32_t kVersion = 3;
inline constexpr size_t kHeaderSize = 4096;
inline constexpr uint32_t kMinEntries = 8;
inline constexpr uint32_t kMaxEntries = 1u << 16;
inline constexpr size_t kErrorMessageSize = 240;

// Operation codes of SubmissionEntry::op.
enum class OpCode : uint8_t { kWrite = 1, kRead = 2 };

// SubmissionEntry::flags.
inline constexpr uint8_t kFlagImmediate = 1;  // WRITE carries `immediate`
inline constexpr uint8_t kKnownFlags = kFlagImmediate;

// 64 bytes: one cache line.
struct SubmissionEntry {
  uint8_t op;          // OpCode
  uint8_t flags;       // kFlag*
  uint16_t reserved0;  // 0
  uint32_t immediate;  // with kFlagImmediate: delivered to the target's owner
  uint64_t tag;        // the client's; returned in the completion
  uint64_t local_region;  // id of a region the client may use
  uint64_t local_offset;
  uint64_t remote_handle;  // from OpenRemote
  uint64_t remote_offset;
  uint64_t length;          // 1 .. the region sizes
  uint32_t timeout_ms;      // 0: the queue's default
  // Position + 1 (mod 2^32), written last: the entry is published.
  uint32_t sequence;
};
static_assert(sizeof(SubmissionEntry) == 64);
static_assert(offsetof(SubmissionEntry, sequence) == 60);

// CompletionEntry::kind.
enum class CompletionKind : uint8_t {
  kCompletion = 1,    // of a submission
  kNotification = 2,  // a WRITE with immediate landed in one of our regions
  // Notifications past the daemon's backlog bound, lost at this point of
  // the order: `bytes` says how many.
  kNotificationsLost = 3,
};

// CompletionEntry::transport: how an op went or a write came. Ring ABI: the
// numbers are fixed; a reader maps any other number to kUnknown.
enum class CompletionTransport : uint8_t {
  kUnknown = 0,  // not said (an op that failed before a transport was chosen)
  kVerbs = 1,
  kTcp = 2,
  kLocal = 3,  // both regions on one daemon: a memory copy
};
static_assert(static_cast<uint8_t>(CompletionTransport::kVerbs) == 1 &&
              static_cast<uint8_t>(CompletionTransport::kTcp) == 2 &&
              static_cast<uint8_t>(CompletionTransport::kLocal) == 3);

// A CompletionEntry::transport as read off the ring: numbers outside the
// enum are kUnknown.
constexpr CompletionTransport CompletionTransportOf(uint8_t code) {
  return code >= 1 && code <= 3 ? static_cast<CompletionTransport>(code)
                                : CompletionTransport::kUnknown;
}

// "unknown", "verbs", "tcp", "local": for logs and tests.
constexpr std::string_view Name(CompletionTransport transport) {
  switch (transport) {
    case CompletionTransport::kVerbs:
      return "verbs";
    case CompletionTransport::kTcp:
      return "tcp";
    case CompletionTransport::kLocal:
      return "local";
    case CompletionTransport::kUnknown:
      break;
  }
  return "unknown";
}

inline constexpr uint32_t kNoError = 0xffffffff;
// CompletionEntry::tag of a notification whose writer has no local uid
// (it wrote from another node).
inline constexpr uint64_t kNoWriterUid = ~uint64_t{0};

// 64 bytes: one cache line. Fields by kind: c = kCompletion, n =
// kNotification, l = kNotificationsLost; unused fields are 0.
struct CompletionEntry {
  uint8_t kind;       // CompletionKind
  // c: how the op went; n: how the write came (CompletionTransport).
  uint8_t transport;
  uint16_t reserved0;
  int32_t code;  // c: absl::StatusCode; 0 = OK
  // c: the submission's tag; n: the writer's uid (a writer on this node,
  // as its kernel told the daemon), else kNoWriterUid.
  uint64_t tag;
  // c: bytes moved; n: length written; l: notifications lost.
  uint64_t bytes;
  // Index of its slot's text, or kNoError. c: the error message of a
  // failed op; n: the writing daemon's Peer address ("HOST:PORT").
  uint32_t error;
  uint32_t immediate;  // n: the sender's immediate
  uint64_t region;     // n: the region written
  uint64_t offset;     // n: where in it
  uint64_t daemon_ns;  // c: time inside the daemon, taken to done
  // Position + 1 (1 .. 2^32), written last: the entry is published.
  uint64_t sequence;
};
static_assert(sizeof(CompletionEntry) == 64);
static_assert(offsetof(CompletionEntry, tag) == 8);
static_assert(offsetof(CompletionEntry, bytes) == 16);
static_assert(offsetof(CompletionEntry, error) == 24);
static_assert(offsetof(CompletionEntry, region) == 32);
static_assert(offsetof(CompletionEntry, sequence) == 56);

struct ErrorSlot {
  uint32_t length;  // bytes of `text` used
  uint32_t reserved;
  char text[kErrorMessageSize];
};
static_assert(sizeof(ErrorSlot) == 248);

// QueueHeader::state.
enum class QueueState : uint32_t { kActive = 1, kStopped = 2 };

// Each index on a cache line of its own: the two sides write different
// lines.
struct alignas(64) QueueHeader {
  // Written once by the daemon before the segment is handed over.
  uint32_t magic;
  uint32_t version;
  uint32_t sq_entries;
  uint32_t cq_entries;
  uint64_t sq_offset;
  uint64_t cq_offset;
  uint64_t errors_offset;  // cq_entries error slots
  uint64_t total_size;
  // Daemon-written state: when kStopped, `stop_code` and the message in
  // `stop_message` say why; the queue takes no more submissions.
  alignas(64) std::atomic<uint32_t> state;
  int32_t stop_code;
  char stop_message[kErrorMessageSize];
  alignas(64) std::atomic<uint32_t> sq_tail;          // client
  alignas(64) std::atomic<uint32_t> sq_head;          // daemon
  alignas(64) std::atomic<uint32_t> cq_tail;          // daemon
  alignas(64) std::atomic<uint32_t> cq_head;          // client
  alignas(64) std::atomic<uint32_t> engine_sleeping;  // daemon
  alignas(64) std::atomic<uint32_t> client_waiting;   // client
  // CPU numbers plus one, so that 0 (a fresh segment, or a daemon that
  // predates them) means "not known": the client then spins as before.
  // client_cpu is 0 too while the client busy-polls (not waiting on a CPU).
  std::atomic<int32_t> client_cpu;                    // client
  alignas(64) std::atomic<int32_t> engine_cpu;        // daemon
  // Notifications the daemon holds for this queue because the ring had no
  // room to spare for them (see above); 0 when none wait.
  alignas(64) std::atomic<uint32_t> notifications_held;  // daemon
};
static_assert(sizeof(QueueHeader) <= kHeaderSize);
static_assert(offsetof(QueueHeader, notifications_held) % 64 == 0);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<int32_t>::is_always_lock_free);

// Where everything lives in a segment for the given ring sizes.
struct Geometry {
  uint32_t sq_entries = 0;
  uint32_t cq_entries = 0;
  uint64_t sq_offset = 0;
  uint64_t cq_offset = 0;
  uint64_t errors_offset = 0;
  uint64_t total_size = 0;
};

inline bool IsPowerOfTwo(uint32_t n) { return n != 0 && (n & (n - 1)) == 0; }

// Sizes are rounded up to powers of two within [kMinEntries, kMaxEntries].
inline Geometry GeometryFor(uint32_t sq_entries, uint32_t cq_entries) {
  auto round = [](uint32_t n) {
    uint32_t p = kMinEntries;
    while (p < n && p < kMaxEntries) p <<= 1;
    return p;
  };
  Geometry g;
  g.sq_entries = round(sq_entries);
  g.cq_entries = round(cq_entries);
  g.sq_offset = kHeaderSize;
  g.cq_offset = g.sq_offset + uint64_t{g.sq_entries} * sizeof(SubmissionEntry);
  g.errors_offset =
      g.cq_offset + uint64_t{g.cq_entries} * sizeof(CompletionEntry);
  const uint64_t end =
      g.errors_offset + uint64_t{g.cq_entries} * sizeof(ErrorSlot);
  g.total_size = (end + 4095) & ~uint64_t{4095};
  return g;
}

}  // namespace rdmad::queue

#endif  // RDMAD_COMMON_QUEUE_LAYOUT_H_
