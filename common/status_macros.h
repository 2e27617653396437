// Status propagation helpers.
//
// Debian's abseil (20220623) ships no ABSL_RETURN_IF_ERROR, so rdmad keeps
// these two small macros. They are the only macros in the project.
//
// Example:
//   absl::StatusOr<int> ParseThing(absl::string_view s);
//   absl::Status Use(absl::string_view s) {
//     RDMAD_ASSIGN_OR_RETURN(int v, ParseThing(s));
//     RDMAD_RETURN_IF_ERROR(Check(v));
//     return absl::OkStatus();
//   }
#ifndef RDMAD_COMMON_STATUS_MACROS_H_
#define RDMAD_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RDMAD_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status rdmad_status_ = (expr);         \
    if (!rdmad_status_.ok()) return rdmad_status_; \
  } while (0)

#define RDMAD_STATUS_CONCAT_INNER_(a, b) a##b
#define RDMAD_STATUS_CONCAT_(a, b) RDMAD_STATUS_CONCAT_INNER_(a, b)

#define RDMAD_ASSIGN_OR_RETURN(lhs, expr)                                     \
  RDMAD_ASSIGN_OR_RETURN_IMPL_(RDMAD_STATUS_CONCAT_(rdmad_statusor_, __LINE__), \
                               lhs, expr)

#define RDMAD_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // RDMAD_COMMON_STATUS_MACROS_H_
