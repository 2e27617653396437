// NotificationSink: where a WRITE with an immediate, once its data is in a
// region of this daemon, is announced: to the session(s) that own the
// region, on the queue each registered for notifications (daemon/ring).
// The core and the TCP data server only know this interface.
#ifndef RDMAD_DAEMON_CORE_NOTIFICATION_SINK_H_
#define RDMAD_DAEMON_CORE_NOTIFICATION_SINK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/core/region.h"

namespace rdmad::core {

class NotificationSink {
 public:
  virtual ~NotificationSink() = default;
  // [offset, offset+length) of `region` was written with `immediate`.
  // Thread-safe, never blocks; called after the data is in place. OK when
  // the owner was told, or has no notification queue to tell;
  // RESOURCE_EXHAUSTED, saying so, when it has one but none took the
  // notification (full or stopped): the writer must learn that the data
  // landed unannounced, as a WRITE with an immediate to a receiver with no
  // room fails on a NIC.
  virtual absl::Status Notify(const Region& region, uint64_t offset,
                              uint64_t length, uint32_t immediate) = 0;
};

// The RESOURCE_EXHAUSTED a sink's Notify returns when the owner of
// `region` (a label, as Region::Label) was not told; also what a verbs
// writer rebuilds from its peer's ack (verbs_notice.h), so that both
// transports say the same.
absl::Status OwnerNotToldError(absl::string_view region);

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_NOTIFICATION_SINK_H_
