#include "common/region_address.h"

#include "common/host_port.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/size.h"
#include "common/status_macros.h"

namespace rdmad {

absl::Status ValidateRegionName(absl::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError("region name is empty");
  }
  if (name.size() > kMaxRegionNameLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "region name is ", name.size(), " characters long; the limit is ",
        kMaxRegionNameLength));
  }
  // '/' separates parts ("kv/shard-7"); every part follows the rules of a
  // whole name, so there is no empty part, "." or "..".
  bool part_start = true;
  for (char c : name) {
    if (c == '/') {
      if (part_start) {
        return absl::InvalidArgumentError(absl::StrCat(
            "region name '", name,
            "' has an empty part: '/' separates non-empty parts, as in "
            "kv/shard-7"));
      }
      part_start = true;
      continue;
    }
    if (part_start && (c == '.' || c == '-')) {
      return absl::InvalidArgumentError(absl::StrCat(
          "region name '", name,
          "' must not start with '.' or '-' (nor any part after a '/')"));
    }
    part_start = false;
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          "region name '", name, "' contains '", std::string(1, c),
          "': use only letters, digits, '.', '_', '-' and '/' between "
          "parts"));
    }
  }
  if (part_start) {
    return absl::InvalidArgumentError(absl::StrCat(
        "region name '", name, "' must not end with '/'"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePeerAddress(absl::string_view peer,
                                 bool is_listen_address) {
  return ParseHostPort(peer, is_listen_address ? AddressUse::kListen
                                               : AddressUse::kDial)
      .status();
}

absl::StatusOr<RegionAddress> ParseRegionAddress(absl::string_view text) {
  RegionAddress address;
  absl::string_view rest = text;
  // Names may contain '/' ("kv/shard-7") but never ':', which every
  // HOST:PORT has: a first part with a ':' is the peer.
  const size_t slash = rest.find('/');
  if (slash != absl::string_view::npos &&
      rest.substr(0, slash).find(':') != absl::string_view::npos) {
    address.peer = std::string(rest.substr(0, slash));
    rest = rest.substr(slash + 1);
    RDMAD_RETURN_IF_ERROR(ValidatePeerAddress(address.peer));
  }
  const size_t at = rest.rfind('@');
  if (at != absl::string_view::npos) {
    auto offset = ParseSize(rest.substr(at + 1));
    if (!offset.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad offset in region address '", text, "': ",
          offset.status().message()));
    }
    address.offset = *offset;
    rest = rest.substr(0, at);
  }
  address.name = std::string(rest);
  absl::Status name_ok = ValidateRegionName(address.name);
  if (!name_ok.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad region address '", text, "' (expected [HOST:PORT/]NAME[@OFFSET]): ",
        name_ok.message()));
  }
  return address;
}

}  // namespace rdmad
