// Region names and the `[PEER/]NAME[@OFFSET]` address syntax of rdmactl.
//
// Example:
//   "cache"                 local region "cache" at offset 0
//   "cache@4K"              local region "cache" at offset 4096
//   "10.0.0.2:7471/cache@1M" region "cache" on the daemon at 10.0.0.2:7471
//   "[::1]:7471/kv"         IPv6 peers are bracketed
//   "kv/shard-7@64"         region "kv/shard-7" (no ':' before the '/': no
//                           peer), here or, with a cluster directory,
//                           wherever the directory says it is
#ifndef RDMAD_COMMON_REGION_ADDRESS_H_
#define RDMAD_COMMON_REGION_ADDRESS_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rdmad {

// Longest region name accepted.
inline constexpr size_t kMaxRegionNameLength = 128;

// Region names are 1..128 characters: parts of [A-Za-z0-9._-] that do not
// start with '.' or '-', joined by single '/' ("kv/shard-7": hierarchical
// names list well with `rdmactl ls kv/`). Never ':' or '@', so that
// [PEER/]NAME[@OFFSET] stays unambiguous. Returns INVALID_ARGUMENT saying
// what is wrong otherwise.
absl::Status ValidateRegionName(absl::string_view name);


// Validates "HOST:PORT": HOST is an IPv4 address, a bracketed IPv6 address
// (a zone may follow '%') or a DNS host name (labels of letters, digits,
// '-' and '_'; no spaces, NULs or other bytes); PORT is decimal digits only.
// Port 0 ("any free port") is accepted only for listen addresses.
// INVALID_ARGUMENT says what is wrong, quoting the value escaped.
absl::Status ValidatePeerAddress(absl::string_view peer,
                                 bool is_listen_address = false);

struct RegionAddress {
  std::string peer;  // "HOST:PORT"; empty for a local region
  std::string name;
  uint64_t offset = 0;

  bool is_remote() const { return !peer.empty(); }
};

// Parses `[PEER/]NAME[@OFFSET]`; OFFSET accepts size suffixes ("4K").
absl::StatusOr<RegionAddress> ParseRegionAddress(absl::string_view text);

}  // namespace rdmad

#endif  // RDMAD_COMMON_REGION_ADDRESS_H_
