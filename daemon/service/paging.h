// Page sizes and page tokens of the listing RPCs (Local.ListRegions,
// Local.ListRemoteRegions, Local.ListQueues, Peer.ListExports).
//
// A token is where the previous page ended: the last region id (by id) or
// the last name (by name), as text. It is not secret and not signed: a
// client that forges one only skips regions it could list anyway. Anything
// that does not parse is INVALID_ARGUMENT.
#ifndef RDMAD_DAEMON_SERVICE_PAGING_H_
#define RDMAD_DAEMON_SERVICE_PAGING_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace rdmad::service {

inline constexpr size_t kDefaultPageSize = 1000;
inline constexpr size_t kMaxPageSize = 5000;

// 0 -> kDefaultPageSize; above kMaxPageSize -> kMaxPageSize.
size_t PageSize(uint32_t requested);

// Tokens of listings by id: "" is the start (0).
absl::StatusOr<uint64_t> ParseIdToken(const std::string& token);
std::string IdToken(uint64_t last_id);

// Tokens of listings by name: "" is the start; otherwise a region name.
absl::StatusOr<std::string> ParseNameToken(const std::string& token);

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_PAGING_H_
