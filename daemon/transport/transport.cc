#include "daemon/transport/transport.h"

namespace rdmad::transport {

absl::string_view ConnectionStateName(ConnectionState state) {
  switch (state) {
    case ConnectionState::kIdle:
      return "IDLE";
    case ConnectionState::kConnecting:
      return "CONNECTING";
    case ConnectionState::kReady:
      return "READY";
    case ConnectionState::kError:
      return "ERROR";
    case ConnectionState::kClosed:
      break;
  }
  return "CLOSED";
}

absl::string_view ChannelStateName(ChannelState state) {
  switch (state) {
    case ChannelState::kReady:
      return "READY";
    case ChannelState::kDegraded:
      return "DEGRADED";
    case ChannelState::kError:
      return "ERROR";
    case ChannelState::kClosed:
      break;
  }
  return "CLOSED";
}

absl::string_view RailStatusName(RailStatus status) {
  switch (status) {
    case RailStatus::kActive:
      return "ACTIVE";
    case RailStatus::kProbing:
      return "PROBING";
    case RailStatus::kPaused:
      return "PAUSED";
    case RailStatus::kRebuilding:
      break;
  }
  return "REBUILDING";
}

}  // namespace rdmad::transport
