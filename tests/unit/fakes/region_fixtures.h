// Regions for unit tests of what reads the region table (the transfer
// engine, the policies and services over it): named, daemon-owned regions
// with the permissions and export a test asks for.
#ifndef RDMAD_TESTS_UNIT_FAKES_REGION_FIXTURES_H_
#define RDMAD_TESTS_UNIT_FAKES_REGION_FIXTURES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "daemon/core/region_table.h"
#include "daemon/core/transfer.h"

namespace rdmad::core::testing {

// Allocates the daemon-owned region `name` of `owner` in `regions`: `size`
// bytes, local permissions `mode` (as a file's), exported to peers with
// `access`.
inline absl::Status AllocateNamed(RegionTable& regions, const Caller& owner,
                                  const std::string& name, uint64_t size,
                                  uint32_t mode,
                                  RemoteAccess access = RemoteAccess::kNone) {
  AllocateOptions options;
  options.name = name;
  options.size = size;
  options.mode = mode;
  options.daemon_owned = true;
  options.export_access = access;
  return regions.Allocate(owner, options).status();
}

// The region `name`, as root finds it; null when there is none.
inline std::shared_ptr<Region> FindNamed(const RegionTable& regions,
                                         const std::string& name) {
  auto found = regions.FindForUse(Caller{.uid = 0}, {0, name});
  return found.ok() ? *std::move(found) : nullptr;
}

// A target on this daemon by name.
inline TransferTarget ByName(const std::string& name) {
  TransferTarget t;
  t.name = name;
  return t;
}

// A descriptor of this daemon naming the export of `region`, as
// RouteToSelf leaves it (service/self_route.h); a non-zero `key_xor`
// spoils its key.
inline TransferTarget BySelfDescriptor(const Region& region,
                                       uint64_t key_xor = 0) {
  TransferTarget t;
  t.self_region_id = region.id();
  t.self_key = region.exported().tcp_key ^ key_xor;
  return t;
}

}  // namespace rdmad::core::testing

#endif  // RDMAD_TESTS_UNIT_FAKES_REGION_FIXTURES_H_
