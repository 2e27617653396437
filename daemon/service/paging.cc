#include "daemon/service/paging.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/region_address.h"

namespace rdmad::service {
namespace {

absl::Status BadToken(const std::string& token) {
  return absl::InvalidArgumentError(absl::StrCat(
      "page_token '", token.substr(0, 64),
      "' is not one this daemon gave out: pass next_page_token of the "
      "previous answer unchanged, or none for the first page"));
}

}  // namespace

size_t PageSize(uint32_t requested) {
  if (requested == 0) return kDefaultPageSize;
  return std::min<size_t>(requested, kMaxPageSize);
}

absl::StatusOr<uint64_t> ParseIdToken(const std::string& token) {
  if (token.empty()) return 0;
  uint64_t id = 0;
  if (!absl::SimpleAtoi(token, &id) || token.front() == '+') {
    return BadToken(token);
  }
  return id;
}

std::string IdToken(uint64_t last_id) { return absl::StrCat(last_id); }

absl::StatusOr<std::string> ParseNameToken(const std::string& token) {
  if (token.empty()) return token;
  if (!ValidateRegionName(token).ok()) return BadToken(token);
  return token;
}

}  // namespace rdmad::service
