// Implementation of include/rdmad/info.h: the names of its enums, as
// rdmactl prints them and the daemon reports them.
#include "rdmad/info.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace rdmad {

absl::StatusOr<Access> ParseAccess(absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "r" || t == "read") return Access::kRead;
  if (t == "w" || t == "write") return Access::kWrite;
  if (t == "rw" || t == "wr" || t == "read-write") return Access::kReadWrite;
  if (t == "none" || t == "-") return Access::kNone;
  return absl::InvalidArgumentError(
      absl::StrCat("access '", text, "' is not one of r, w, rw, none"));
}

absl::string_view AccessName(Access access) {
  switch (access) {
    case Access::kRead:
      return "r";
    case Access::kWrite:
      return "w";
    case Access::kReadWrite:
      return "rw";
    case Access::kNone:
      break;
  }
  return "none";
}

absl::string_view TransportName(Transport transport) {
  switch (transport) {
    case Transport::kVerbs:
      return "verbs";
    case Transport::kTcp:
      return "tcp";
    case Transport::kLocal:
      return "local";
    case Transport::kNone:
      break;
  }
  return "-";
}

absl::string_view RegionOwnerName(RegionOwner owner) {
  switch (owner) {
    case RegionOwner::kSession:
      return "session";
    case RegionOwner::kDaemon:
      return "daemon";
    case RegionOwner::kUnspecified:
      break;
  }
  return "-";
}

absl::string_view DirectoryStateName(DirectoryState state) {
  switch (state) {
    case DirectoryState::kConnecting:
      return "connecting";
    case DirectoryState::kConnected:
      return "connected";
    case DirectoryState::kDisconnected:
      return "disconnected";
    case DirectoryState::kStopped:
      return "stopped";
    case DirectoryState::kUnknown:
      break;
  }
  return "unknown";
}

absl::string_view PortStateName(PortState state) {
  switch (state) {
    case PortState::kNop:
      return "NOP";
    case PortState::kDown:
      return "DOWN";
    case PortState::kInit:
      return "INIT";
    case PortState::kArmed:
      return "ARMED";
    case PortState::kActive:
      return "ACTIVE";
    case PortState::kActiveDefer:
      return "ACTIVE_DEFER";
    case PortState::kUnknown:
      break;
  }
  return "UNKNOWN";
}

absl::string_view PeerStateName(PeerState state) {
  switch (state) {
    case PeerState::kNew:
      return "NEW";
    case PeerState::kHello:
      return "HELLO";
    case PeerState::kConnecting:
      return "CONNECTING";
    case PeerState::kReady:
      return "READY";
    case PeerState::kDegraded:
      return "DEGRADED";
    case PeerState::kError:
      return "ERROR";
    case PeerState::kClosed:
      return "CLOSED";
    case PeerState::kFailed:
      return "FAILED";
    case PeerState::kRetired:
      return "RETIRED";
    case PeerState::kUnknown:
      break;
  }
  return "UNKNOWN";
}

absl::string_view RailStateName(RailState state) {
  switch (state) {
    case RailState::kActive:
      return "ACTIVE";
    case RailState::kProbing:
      return "PROBING";
    case RailState::kPaused:
      return "PAUSED";
    case RailState::kRebuilding:
      return "REBUILDING";
    case RailState::kUnknown:
      break;
  }
  return "UNKNOWN";
}

absl::string_view QpStateName(QpState state) {
  switch (state) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kSqd:
      return "SQD";
    case QpState::kSqe:
      return "SQE";
    case QpState::kErr:
      return "ERR";
    case QpState::kDestroyed:
      return "DESTROYED";
    case QpState::kIdle:
      return "IDLE";
    case QpState::kConnecting:
      return "CONNECTING";
    case QpState::kReady:
      return "READY";
    case QpState::kError:
      return "ERROR";
    case QpState::kClosed:
      return "CLOSED";
    case QpState::kUnknown:
      break;
  }
  return "UNKNOWN";
}

}  // namespace rdmad
