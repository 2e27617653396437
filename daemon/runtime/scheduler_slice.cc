#include "daemon/runtime/scheduler_slice.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace rdmad::runtime {
namespace {

// The kernel's struct sched_attr (include/uapi/linux/sched/types.h, which
// cannot be included beside <sched.h>): its layout is the system call's ABI.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};

absl::StatusOr<SchedAttr> GetAttr() {
  SchedAttr attr{};
  if (::syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0) != 0) {
    return absl::ErrnoToStatus(errno, "sched_getattr");
  }
  return attr;
}

}  // namespace

absl::Status RequestSchedulerSlice(absl::Duration slice) {
  absl::StatusOr<SchedAttr> attr = GetAttr();
  if (!attr.ok()) return attr.status();
  if (attr->sched_policy != SCHED_OTHER) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the thread runs under scheduling policy ", attr->sched_policy,
        ", not SCHED_OTHER: its time slice is left as it is"));
  }
  attr->size = sizeof(SchedAttr);
  attr->sched_flags = 0;
  attr->sched_runtime = static_cast<uint64_t>(absl::ToInt64Nanoseconds(
      std::clamp(slice, kMinSchedulerSlice, kMaxSchedulerSlice)));
  if (::syscall(SYS_sched_setattr, 0, &*attr, 0) != 0) {
    return absl::ErrnoToStatus(errno, "sched_setattr (time slice)");
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> SchedulerSlice() {
  absl::StatusOr<SchedAttr> attr = GetAttr();
  if (!attr.ok()) return attr.status();
  return absl::Nanoseconds(attr->sched_runtime);
}

}  // namespace rdmad::runtime
