// The config's `directory` URL and `directory_prefix`, checked where the
// config is checked (no etcd or gRPC needed).
//
// Example:
//   auto endpoints = ParseDirectoryUrl("etcd://10.0.0.9:2379,10.0.0.10:2379");
//   // {"10.0.0.9:2379", "10.0.0.10:2379"}
#ifndef RDMAD_COMMON_DIRECTORY_URL_H_
#define RDMAD_COMMON_DIRECTORY_URL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdmad {

// Parses "etcd://HOST:PORT[,HOST:PORT...]" (at most 16 endpoints).
absl::StatusOr<std::vector<std::string>> ParseDirectoryUrl(
    absl::string_view url);

// A key prefix starts with '/', does not end with '/' (unless it is "/")
// and holds only printable ASCII without spaces; at most 256 characters.
absl::Status ValidateDirectoryPrefix(absl::string_view prefix);

}  // namespace rdmad

#endif  // RDMAD_COMMON_DIRECTORY_URL_H_
