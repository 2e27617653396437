#include "daemon/directory/directory_keys.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/region_address.h"

namespace rdmad::directory {

std::string RangeEnd(absl::string_view key) {
  std::string end(key);
  // Drop trailing 0xff bytes, which cannot be incremented; an all-0xff (or
  // empty) key has no end short of "everything": "\0".
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) {
    end.pop_back();
  }
  if (end.empty()) return std::string(1, '\0');
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

std::string DirectoryKeys::Region(absl::string_view name) const {
  return absl::StrCat(RegionsPrefix(), name);
}

std::string DirectoryKeys::Node(absl::string_view address) const {
  return absl::StrCat(NodesPrefix(), address);
}

std::optional<std::string> DirectoryKeys::RegionName(
    absl::string_view key) const {
  const std::string regions = RegionsPrefix();
  if (!absl::StartsWith(key, regions)) return std::nullopt;
  absl::string_view name = key.substr(regions.size());
  if (!ValidateRegionName(name).ok()) return std::nullopt;
  return std::string(name);
}

}  // namespace rdmad::directory
