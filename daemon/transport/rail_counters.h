// What one rail of a verbs data channel did so far: the counters the rail
// scheduler keeps (daemon/transport/verbs/rail_scheduler.h) and ListPeers
// and the metrics show (RailInfo in transport.h). A plain value; copies
// are snapshots.
#ifndef RDMAD_DAEMON_TRANSPORT_RAIL_COUNTERS_H_
#define RDMAD_DAEMON_TRANSPORT_RAIL_COUNTERS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace rdmad::transport {

struct RailCounters {
  bool port_active = true;
  uint64_t bytes = 0;   // completed
  uint64_t ops = 0;     // operations or pieces completed
  uint64_t errors = 0;  // operations or pieces failed
  uint64_t pauses = 0;
  uint64_t outstanding_bytes = 0;
  double bandwidth = 0;  // bytes/s, EWMA of its completions; 0 unknown
  absl::Duration paused_left = absl::ZeroDuration();
  std::string last_error;  // why it was last paused
};

}  // namespace rdmad::transport

#endif  // RDMAD_DAEMON_TRANSPORT_RAIL_COUNTERS_H_
