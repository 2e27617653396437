// QueueControl: what the Local service does with client queues and remote
// handles (OpenQueue, CloseQueue, ListQueues, OpenRemote, CloseRemote).
// QueueRegistry implements it; the service takes it, so that its unit tests
// can answer in its place. None of these calls is on the data path, which
// is the ring itself.
#ifndef RDMAD_DAEMON_RING_QUEUE_CONTROL_H_
#define RDMAD_DAEMON_RING_QUEUE_CONTROL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/queue_layout.h"
#include "daemon/core/region.h"
#include "daemon/ring/remote_handles.h"
#include "daemon/ring/ring_queue.h"

namespace rdmad::ring {

// One open queue, as ListQueues shows it.
struct QueueSnapshot {
  uint64_t id = 0;
  core::Caller caller;  // the session that opened it
  queue::Geometry geometry;
  bool notifications = false;
  std::string engine;  // the engine loop that polls it
  RingQueueStats stats;
};

// A queue just opened, as its client is told of it.
struct OpenedQueue {
  uint64_t id = 0;
  queue::Geometry geometry;
  uint64_t segment_size = 0;
};

// Thread-safe in every implementation.
class QueueControl {
 public:
  virtual ~QueueControl() = default;

  // A new queue for `caller`'s session (QueueRegistry::Open says when it
  // is refused).
  virtual absl::StatusOr<OpenedQueue> OpenQueue(
      const core::Caller& caller, const RingQueueOptions& options) = 0;
  // NOT_FOUND unless the session has that queue.
  virtual absl::Status Close(uint64_t session_id, uint64_t queue_id) = 0;
  // The session's remote handles (made on first use); UNAUTHENTICATED
  // once the session has ended.
  virtual absl::StatusOr<std::shared_ptr<RemoteHandles>> HandlesOf(
      uint64_t session_id) = 0;
  // Every open queue (stopped ones included until closed), by id.
  virtual std::vector<QueueSnapshot> List() const = 0;
};

}  // namespace rdmad::ring

#endif  // RDMAD_DAEMON_RING_QUEUE_CONTROL_H_
