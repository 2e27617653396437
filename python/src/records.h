// The fixed records that Python hands a Queue and gets back from it: one
// operation, one completion, one notification. Declared here once; the
// module exports each layout (name, numpy format, offset) and
// rdmad/_records.py builds the numpy dtypes from it, so Python and C++
// cannot disagree.
//
// A record array is untrusted input like a ring entry: Queue.submit copies
// each record and checks kind, flags and the ids it names before it
// becomes an rdmad::Op (the daemon checks lengths, ranges and rights).
#ifndef RDMAD_PYTHON_RECORDS_H_
#define RDMAD_PYTHON_RECORDS_H_

#include <cstddef>
#include <cstdint>

namespace rdmad::python {

// OpRecord::kind.
inline constexpr uint8_t kKindWrite = 1;
inline constexpr uint8_t kKindRead = 2;
// OpRecord::flags.
inline constexpr uint8_t kFlagImmediate = 1;  // `immediate` is set (WRITE)
inline constexpr uint8_t kKnownFlags = kFlagImmediate;

// One operation: 64 bytes.
struct OpRecord {
  uint8_t kind;        // kKindWrite or kKindRead
  uint8_t flags;       // kFlag*
  uint16_t reserved;   // 0
  uint32_t immediate;  // with kFlagImmediate
  uint64_t tag;        // returned in the completion
  uint64_t local;      // Buffer.id of a buffer of the queue's client
  uint64_t local_offset;
  uint64_t remote;  // RemoteHandle.id of a handle of that client
  uint64_t remote_offset;
  uint64_t length;
  uint32_t timeout_ms;  // 0: the queue's default
  uint32_t reserved2;   // 0
};
static_assert(sizeof(OpRecord) == 64);

// One completion: 32 bytes. `code` is an absl::StatusCode (0: OK); the
// message of a failed one is in the Completions array's `messages`.
struct CompletionRecord {
  uint64_t tag;
  uint64_t bytes;
  uint64_t daemon_ns;  // how long the daemon worked on it
  int32_t code;
  uint8_t transport;  // 0 none, 1 verbs, 2 tcp, 3 local
  uint8_t reserved[3];
};
static_assert(sizeof(CompletionRecord) == 32);

// One notification: a peer wrote [offset, offset + bytes) of region
// `region` (a Buffer.id of this session) with `immediate`; `writer` is the
// writing daemon's Peer address (NUL-padded), `writer_uid` a local
// writer's uid (-1 for a remote writer). Or, with `lost` > 0 (and the rest
// zero), that many notifications were lost at this point in the order
// (the daemon's backlog for this uid was full). 112 bytes.
struct NotificationRecord {
  uint64_t region;
  uint64_t offset;
  uint64_t bytes;
  uint64_t lost;
  uint32_t immediate;
  uint32_t reserved;
  int64_t writer_uid;
  char writer[64];
};
static_assert(sizeof(NotificationRecord) == 112);

}  // namespace rdmad::python

#endif  // RDMAD_PYTHON_RECORDS_H_
