// The daemon's configuration file: a text-format rdmad.v1.DaemonConfig
// (normally /etc/rdmad/rdmad.conf), parsed strictly and checked field by
// field, so that every mistake is reported with the file, line and field
// instead of surfacing later as odd behaviour.
//
// Example:
//   auto config = config::LoadConfigFile("/etc/rdmad/rdmad.conf");
//   if (!config.ok()) ...  // "/etc/rdmad/rdmad.conf:4:1: field 'qp_timeout':
//                          //  40 must be 0..31 (4.096 us * 2^n)"
//   ... apply command-line overrides ...
//   config::ApplyDefaults(*config);
//   RDMAD_RETURN_IF_ERROR(config::ValidateConfig(*config, "command line"));
#ifndef RDMAD_DAEMON_CONFIG_CONFIG_FILE_H_
#define RDMAD_DAEMON_CONFIG_CONFIG_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rdmad/v1/config.pb.h"

namespace rdmad::config {

// Largest config file read: real ones are a few KiB.
inline constexpr uint64_t kMaxConfigBytes = 1 << 20;

// max_peers when the config leaves it 0 (ApplyDefaults); CheckConfig bounds
// max_peers_per_uid by it then.
inline constexpr uint32_t kDefaultMaxPeers = 8192;

// One semantic mistake in a config: the field (as named in the file) and
// what is wrong with its value.
struct FieldError {
  std::string field;
  std::string message;
  int index = -1;  // which element, for a repeated field (peer_allow)
};

// Checks the values the daemon relies on (log level, socket path and mode,
// socket group, transport, addresses, peer allow-list, TLS files, verbs
// settings). Fields left at their zero value mean "default" and pass.
// Reads the TLS files and the group database (what the daemon will do at
// start), nothing else.
std::vector<FieldError> CheckConfig(const v1::DaemonConfig& config);

// CheckConfig as a status: INVALID_ARGUMENT naming `source` (e.g. "the
// command line") and every bad field; OK if none.
absl::Status ValidateConfig(const v1::DaemonConfig& config,
                            const std::string& source);

// Parses `text` as a DaemonConfig and checks it. `source` (a file name)
// starts every error: "SOURCE:LINE:COLUMN: message". Unknown fields, a
// field given twice and malformed values are errors.
absl::StatusOr<v1::DaemonConfig> ParseConfigText(const std::string& text,
                                                 const std::string& source);

// Reads and parses the file at `path` (ParseConfigText). NOT_FOUND if it
// cannot be read; INVALID_ARGUMENT if it is not a regular file (a
// directory, a device) or is larger than kMaxConfigBytes.
absl::StatusOr<v1::DaemonConfig> LoadConfigFile(const std::string& path);

// Fills unset fields of `config` with rdmad's defaults.
void ApplyDefaults(v1::DaemonConfig& config);

// The metrics endpoint is off when metrics_listen is "" or "off".
bool MetricsEnabled(const v1::DaemonConfig& config);

}  // namespace rdmad::config

#endif  // RDMAD_DAEMON_CONFIG_CONFIG_FILE_H_
