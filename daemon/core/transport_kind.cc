#include "daemon/core/transport_kind.h"

#include "absl/strings/str_cat.h"

namespace rdmad::core {

absl::string_view TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kLocal:
      return "local";
    case TransportKind::kTcp:
      return "tcp";
    case TransportKind::kVerbs:
      return "verbs";
    case TransportKind::kNone:
      break;
  }
  return "none";
}

absl::StatusOr<TransportMode> ParseTransportMode(absl::string_view text) {
  if (text == "auto") return TransportMode::kAuto;
  if (text == "tcp") return TransportMode::kTcp;
  if (text == "verbs") return TransportMode::kVerbs;
  return absl::InvalidArgumentError(absl::StrCat(
      "transport '", text, "' is not one of auto, verbs, tcp"));
}

absl::string_view TransportModeName(TransportMode mode) {
  switch (mode) {
    case TransportMode::kTcp:
      return "tcp";
    case TransportMode::kVerbs:
      return "verbs";
    case TransportMode::kAuto:
      break;
  }
  return "auto";
}

}  // namespace rdmad::core
