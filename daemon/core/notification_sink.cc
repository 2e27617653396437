#include "daemon/core/notification_sink.h"

#include "absl/strings/str_cat.h"

namespace rdmad::core {

absl::Status OwnerNotToldError(absl::string_view region) {
  return absl::ResourceExhaustedError(absl::StrCat(
      region,
      ": the data was written but its owner was not told: its notification "
      "queue is full or stopped (the owner polls none of its completions); "
      "the owner must poll it, or open a new one if it was stopped"));
}

}  // namespace rdmad::core
