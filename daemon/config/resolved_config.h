// ResolvedConfig: what the daemon needs from its configuration in usable
// form — the fields parsed once (socket mode, group id, transport mode,
// peer allow-list) and the files they name read (TLS certificates). The
// checks of the fields themselves are CheckConfig's (config_file.h).
#ifndef RDMAD_DAEMON_CONFIG_RESOLVED_CONFIG_H_
#define RDMAD_DAEMON_CONFIG_RESOLVED_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/core/peer_allow_list.h"
#include "daemon/core/transport_kind.h"
#include "rdmad/v1/config.pb.h"

namespace rdmad::config {

// Mutual TLS material for the Peer service.
struct PeerTls {
  std::string ca;
  std::string cert;
  std::string key;
  // This daemon's name in its certificate (certificate_identity.h): what
  // its cluster directory records name. Empty if it has none, which only a
  // daemon without a directory may.
  std::string identity;
};

struct ResolvedConfig {
  uint32_t socket_mode = 0666;
  int64_t socket_gid = -1;  // -1: leave the sockets' group alone
  core::TransportMode transport = core::TransportMode::kAuto;
  core::PeerAllowList peer_allow;
  std::optional<PeerTls> tls;
};

// `config` has its defaults applied (ApplyDefaults). INVALID_ARGUMENT
// naming the field for a value CheckConfig refuses, a group that does not
// exist, a TLS file that cannot be read or is not PEM, an incomplete TLS
// set, a certificate with no name to be known by (with a directory), a bad
// peer_allow entry.
absl::StatusOr<ResolvedConfig> ResolveConfig(const v1::DaemonConfig& config);

// "0660" -> 0660. INVALID_ARGUMENT unless 1..4 octal digits.
absl::StatusOr<uint32_t> ParseMode(const std::string& text);

// The gid of config socket_group: a decimal gid, or the name of a group
// that exists on this host. -1 when `group` is empty; INVALID_ARGUMENT
// naming it otherwise.
absl::StatusOr<int64_t> ResolveSocketGroup(const std::string& group);

}  // namespace rdmad::config

#endif  // RDMAD_DAEMON_CONFIG_RESOLVED_CONFIG_H_
