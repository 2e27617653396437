#include "common/directory_url.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/region_address.h"

namespace rdmad {

absl::StatusOr<std::vector<std::string>> ParseDirectoryUrl(
    absl::string_view url) {
  constexpr absl::string_view kScheme = "etcd://";
  if (!absl::StartsWith(url, kScheme)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "directory '", url,
        "' must look like etcd://HOST:PORT[,HOST:PORT...]"));
  }
  std::vector<std::string> endpoints;
  for (absl::string_view part :
       absl::StrSplit(url.substr(kScheme.size()), ',')) {
    if (absl::Status s = ValidatePeerAddress(part); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "directory '", url, "': endpoint '", part, "': ", s.message()));
    }
    endpoints.emplace_back(part);
  }
  if (endpoints.size() > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("directory '", url, "' lists more than 16 endpoints"));
  }
  return endpoints;
}

absl::Status ValidateDirectoryPrefix(absl::string_view prefix) {
  if (prefix.empty() || prefix.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "directory prefix '", prefix, "' must start with '/', e.g. /rdmad"));
  }
  if (prefix.size() > 1 && prefix.back() == '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "directory prefix '", prefix, "' must not end with '/'"));
  }
  if (prefix.size() > 256) {
    return absl::InvalidArgumentError(
        "directory prefix is longer than 256 characters");
  }
  for (char c : prefix) {
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(absl::StrCat(
          "directory prefix '", prefix,
          "' may hold only printable ASCII characters without spaces"));
    }
  }
  return absl::OkStatus();
}

}  // namespace rdmad
