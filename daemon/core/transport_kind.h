// The transports a transfer can take, and the config's choice among them.
// One enum everywhere below the gRPC edge (config, results, channel info,
// peers, metrics); proto_convert.h maps it to rdmad.v1.TransportKind.
#ifndef RDMAD_DAEMON_CORE_TRANSPORT_KIND_H_
#define RDMAD_DAEMON_CORE_TRANSPORT_KIND_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdmad::core {

enum class TransportKind : uint8_t {
  kNone,   // not chosen yet
  kLocal,  // both regions on this daemon: a memory copy
  kTcp,    // rdmad's framed TCP data channel
  kVerbs,  // RDMA RC queue pairs
};

// "none", "local", "tcp", "verbs": the spelling of logs, metrics labels and
// rdmactl.
absl::string_view TransportKindName(TransportKind kind);

// What the daemon may use to reach peers (config `transport`).
enum class TransportMode : uint8_t {
  kAuto,   // verbs where both daemons can use it, else TCP
  kTcp,    // TCP only
  kVerbs,  // verbs only; a peer without it cannot be reached
};

// Parses "auto", "tcp" or "verbs"; INVALID_ARGUMENT naming them otherwise.
absl::StatusOr<TransportMode> ParseTransportMode(absl::string_view text);
absl::string_view TransportModeName(TransportMode mode);

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_TRANSPORT_KIND_H_
