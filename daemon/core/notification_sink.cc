#include "daemon/core/notification_sink.h"

#include "absl/strings/str_cat.h"

namespace rdmad::core {

absl::Status OwnerNotToldError(absl::string_view region) {
  return absl::ResourceExhaustedError(absl::StrCat(
      region,
      ": the data was written but its owner was not told: the peer's "
      "notification queue for it is full or stopped (that rdmad predates "
      "notification backlogs; upgrade it)"));
}

}  // namespace rdmad::core
