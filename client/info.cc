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

}  // namespace rdmad
