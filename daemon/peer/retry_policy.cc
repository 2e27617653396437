#include "daemon/peer/retry_policy.h"

namespace rdmad::peer {

Retry RetryFor(const absl::Status& status, bool from_cache) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
      return Retry::kReconnect;
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
      return from_cache ? Retry::kReresolve : Retry::kNo;
    default:
      return Retry::kNo;
  }
}

}  // namespace rdmad::peer
