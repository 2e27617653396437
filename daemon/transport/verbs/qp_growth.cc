#include "daemon/transport/verbs/qp_growth.h"

#include <algorithm>

namespace rdmad::verbs {

uint32_t QpGrowth::Want(absl::Time now, uint32_t open_qps, bool backlogged) {
  if (!backlogged) {
    backlog_since_.reset();
    return 0;
  }
  if (!backlog_since_.has_value()) backlog_since_ = now;
  if (growing_ || open_qps >= options_.max_qps || now < retry_at_ ||
      now - *backlog_since_ < options_.hysteresis) {
    return 0;
  }
  growing_ = true;
  // Doubling; a pool that lost every QP (0 open) asks for one.
  return std::min(std::max<uint32_t>(open_qps, 1),
                  options_.max_qps - open_qps);
}

void QpGrowth::Done(absl::Time now, bool ok) {
  growing_ = false;
  // The backlog is measured again on the grown pool (or after the wait).
  backlog_since_.reset();
  if (ok) {
    failures_ = 0;
    retry_at_ = absl::InfinitePast();
    return;
  }
  ++failures_;
  absl::Duration wait = options_.retry_after;
  for (uint32_t i = 1; i < failures_ && wait < options_.retry_max; ++i) {
    wait *= 2;
  }
  retry_at_ = now + std::min(wait, options_.retry_max);
}

}  // namespace rdmad::verbs
