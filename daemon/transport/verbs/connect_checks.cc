#include "daemon/transport/verbs/connect_checks.h"

#include "absl/strings/str_cat.h"
#include "daemon/transport/verbs/connect_rails.h"
#include "daemon/transport/verbs/rail_scheduler.h"

namespace rdmad::verbs {

absl::Status CheckConnectRequest(const v1::ConnectRequest& request,
                                 uint32_t max_qps_per_connect) {
  const size_t rails = 1 + static_cast<size_t>(request.extra_rails_size());
  if (rails > kMaxRails) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a verbs Connect may carry at most ", kMaxRails, " rails, got ",
        rails));
  }
  size_t offered = 0;
  for (size_t r = 0; r < rails; ++r) {
    const int count = RailQpsOf(request, r).size();
    if (static_cast<uint32_t>(count) > max_qps_per_connect) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a verbs Connect must carry at most ", max_qps_per_connect,
          " QP endpoints per rail, got ", count, " on rail ", r));
    }
    offered += count > 0;
  }
  if (offered == 0) {
    return absl::InvalidArgumentError(
        "a verbs Connect must carry QP endpoints for at least one rail");
  }
  if (request.address().empty()) {
    return absl::InvalidArgumentError(
        "a verbs Connect must name the caller's Peer address");
  }
  return absl::OkStatus();
}

absl::Status CheckGrowFits(const v1::ConnectRequest& request,
                           absl::Span<const size_t> served,
                           uint32_t max_qps_per_connect) {
  const size_t rails = 1 + static_cast<size_t>(request.extra_rails_size());
  for (size_t r = 0; r < rails; ++r) {
    const size_t adding = static_cast<size_t>(RailQpsOf(request, r).size());
    if (adding == 0) continue;
    const size_t now = r < served.size() ? served[r] : 0;
    if (now == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "verbs grow from ", request.address(), ": rail ", r,
          " is not served; connect again"));
    }
    if (now + adding > max_qps_per_connect) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a verbs pool may have at most ", max_qps_per_connect,
          " QPs per rail; growing rail ", r, " would make it ", now + adding));
    }
  }
  return absl::OkStatus();
}

}  // namespace rdmad::verbs
