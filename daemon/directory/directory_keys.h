// DirectoryKeys: where the cluster directory keeps things in etcd.
//
//   PREFIX/nodes/HOST:PORT   one record per live daemon (its lease)
//   PREFIX/regions/NAME      one record per exported region (holder's lease)
//
// PREFIX is the config's directory_prefix (default "/rdmad"), so that
// several clusters can share one etcd. Region names may contain '/'
// ("kv/shard-7"), so listing a name prefix is a key-range read.
//
// Example:
//   DirectoryKeys keys("/rdmad");
//   keys.Region("kv/shard-7")          // "/rdmad/regions/kv/shard-7"
//   keys.RegionName("/rdmad/regions/kv/shard-7")  // "kv/shard-7"
//   RangeEnd(keys.RegionsPrefix())     // "/rdmad/regions0" ('/' + 1)
#ifndef RDMAD_DAEMON_DIRECTORY_DIRECTORY_KEYS_H_
#define RDMAD_DAEMON_DIRECTORY_DIRECTORY_KEYS_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace rdmad::directory {

// Default for config directory_prefix.
inline constexpr char kDefaultPrefix[] = "/rdmad";

// The etcd range_end that makes [key, RangeEnd(key)) every key starting
// with `key` (the last byte incremented, as etcd's clients do).
std::string RangeEnd(absl::string_view key);

// Immutable; thread-safe.
class DirectoryKeys {
 public:
  explicit DirectoryKeys(std::string prefix) : prefix_(std::move(prefix)) {}

  const std::string& prefix() const { return prefix_; }
  std::string RegionsPrefix() const { return prefix_ + "/regions/"; }
  std::string NodesPrefix() const { return prefix_ + "/nodes/"; }
  std::string Region(absl::string_view name) const;
  std::string Node(absl::string_view address) const;
  // The region name of a key under RegionsPrefix(); nullopt for any other
  // key or one whose name is not a valid region name.
  std::optional<std::string> RegionName(absl::string_view key) const;

 private:
  std::string prefix_;
};

}  // namespace rdmad::directory

#endif  // RDMAD_DAEMON_DIRECTORY_DIRECTORY_KEYS_H_
