// The config's field rules: what CheckConfig accepts for each field, with
// messages that say what to write instead. Reading the file and the
// defaults are in config_file.cc.
#include "daemon/config/config_file.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/directory_url.h"
#include "common/region_address.h"
#include "daemon/config/resolved_config.h"
#include "daemon/core/peer_allow_list.h"
#include "google/protobuf/descriptor.h"

namespace rdmad::config {
namespace {

void CheckAddress(const char* field, const std::string& value,
                  std::vector<FieldError>& errors) {
  if (value.empty()) return;
  if (absl::Status s = ValidatePeerAddress(value, /*listen=*/true); !s.ok()) {
    errors.push_back({field, std::string(s.message())});
  }
}

void CheckAtMost(const char* field, uint64_t value, uint64_t most,
                 const std::string& why, std::vector<FieldError>& errors) {
  if (value > most) {
    errors.push_back({field, absl::StrCat(value, " must be 0..", most, why)});
  }
}

// A work-request size: 0 (the default, `fallback` in words) or
// 4096..2^31 bytes.
void CheckChunkBytes(const char* field, uint64_t value, const char* fallback,
                     std::vector<FieldError>& errors) {
  if (value != 0 && (value < 4096 || value > (1ull << 31))) {
    errors.push_back({field, absl::StrCat(value,
                                          " must be 4096..2147483648 (0: the "
                                          "default, ",
                                          fallback, ")")});
  }
}

// An RDMA device name as libibverbs gives it: printable, at most 63 bytes.
bool IsDeviceName(const std::string& name) {
  return !name.empty() && name.size() <= 63 &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return absl::ascii_isgraph(static_cast<unsigned char>(c));
         });
}

std::string NotADeviceName(const std::string& name) {
  return absl::StrCat("'", absl::CHexEscape(name),
                      "' is not an RDMA device name (e.g. mlx5_0, rxe0)");
}

// The rails' fields: device names (each once, not with `device`), the
// stripe threshold, the pauses and the pins.
void CheckRails(const v1::DaemonConfig& config,
                std::vector<FieldError>& errors) {
  for (int i = 0; i < config.rails_size(); ++i) {
    const std::string& name = config.rails(i);
    if (!IsDeviceName(name)) {
      errors.push_back({"rails", NotADeviceName(name), i});
    } else if (std::find(config.rails().begin(), config.rails().begin() + i,
                         name) != config.rails().begin() + i) {
      errors.push_back({"rails", absl::StrCat("'", name, "' is listed twice"),
                        i});
    }
  }
  if (config.rails_size() > 64) {
    errors.push_back({"rails", absl::StrCat(config.rails_size(),
                                            " devices: at most 64 rails")});
  }
  if (config.rails_size() > 0 && !config.device().empty()) {
    errors.push_back({"device",
                      "set either device (one rail) or rails (several), not "
                      "both: list the device in rails"});
  }
  if (const uint64_t stripe = config.rail_stripe_bytes();
      stripe != 0 && (stripe < 4096 || stripe > (1ull << 30))) {
    errors.push_back({"rail_stripe_bytes",
                      absl::StrCat(stripe,
                                   " must be 4096..1073741824 (0: the "
                                   "default, 64 KiB)")});
  }
  const uint32_t pause = config.rail_pause_seconds();
  const uint32_t pause_max = config.rail_pause_max_seconds();
  CheckAtMost("rail_pause_seconds", pause, 86400, " (a day)", errors);
  CheckAtMost("rail_pause_max_seconds", pause_max, 86400, " (a day)", errors);
  if ((pause != 0 || pause_max != 0) &&
      (pause != 0 ? pause : 30) > (pause_max != 0 ? pause_max : 300)) {
    errors.push_back({"rail_pause_max_seconds",
                      absl::StrCat("the longest pause (", pause_max,
                                   pause_max == 0 ? ", the default 300" : "",
                                   " s) must be at least the first (",
                                   pause != 0 ? pause : 30, " s)")});
  }
  for (int i = 0; i < config.rail_pins_size(); ++i) {
    const v1::RailPin& pin = config.rail_pins(i);
    if (pin.region_prefix().empty()) {
      errors.push_back({"rail_pins", "region_prefix must not be empty", i});
    }
    if (pin.devices().empty()) {
      errors.push_back({"rail_pins",
                        absl::StrCat("the pin of '", pin.region_prefix(),
                                     "' names no devices"),
                        i});
    }
    for (const std::string& device : pin.devices()) {
      if (!IsDeviceName(device)) {
        errors.push_back({"rail_pins", NotADeviceName(device), i});
      }
    }
  }
}

// The cluster directory's fields (docs/DIRECTORY.md).
void CheckDirectory(const v1::DaemonConfig& config,
                    std::vector<FieldError>& errors) {
  const bool on = !config.directory().empty();
  if (on) {
    if (auto endpoints = ParseDirectoryUrl(config.directory());
        !endpoints.ok()) {
      errors.push_back(
          {"directory", std::string(endpoints.status().message())});
    }
  }
  if (!config.directory_prefix().empty()) {
    if (absl::Status s = ValidateDirectoryPrefix(config.directory_prefix());
        !s.ok()) {
      errors.push_back({"directory_prefix", std::string(s.message())});
    }
  }
  if (const uint32_t ttl = config.directory_lease_ttl_seconds();
      ttl != 0 && (ttl < 2 || ttl > 3600)) {
    errors.push_back({"directory_lease_ttl_seconds",
                      absl::StrCat(ttl, " must be 2..3600 seconds")});
  }
  if (config.directory_tls_cert_file().empty() !=
      config.directory_tls_key_file().empty()) {
    errors.push_back({config.directory_tls_cert_file().empty()
                          ? "directory_tls_key_file"
                          : "directory_tls_cert_file",
                      "a client certificate needs both "
                      "directory_tls_cert_file and directory_tls_key_file"});
  }
  if (!config.directory_tls_cert_file().empty() &&
      config.directory_tls_ca_file().empty()) {
    errors.push_back({"directory_tls_cert_file",
                      "a client certificate needs TLS: set "
                      "directory_tls_ca_file to the CA of etcd's certificate"});
  }
  if (config.directory_user().empty() !=
      config.directory_password_file().empty()) {
    errors.push_back({config.directory_user().empty()
                          ? "directory_password_file"
                          : "directory_user",
                      "etcd authentication needs both directory_user and "
                      "directory_password_file"});
  }
  if (!on) {
    for (const auto& [field, value] :
         {std::pair<const char*, const std::string*>{
              "directory_tls_ca_file", &config.directory_tls_ca_file()},
          {"directory_user", &config.directory_user()}}) {
      if (!value->empty()) {
        errors.push_back({field, "set, but no directory: set directory to "
                                 "etcd://HOST:PORT too"});
      }
    }
  }
}

// A group name or number that exists on this host (what socket_group
// needs at start).
void CheckGroup(const std::string& group, std::vector<FieldError>& errors) {
  if (absl::StatusOr<int64_t> gid = ResolveSocketGroup(group); !gid.ok()) {
    errors.push_back({"socket_group", std::string(gid.status().message())});
  }
}

// A PEM file the daemon must read at start: readable, regular, and holding
// a block of `kind` ("CERTIFICATE", "PRIVATE KEY").
void CheckPemFile(const char* field, const std::string& path,
                  absl::string_view kind, std::vector<FieldError>& errors) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    errors.push_back({field, absl::StrCat("cannot read '", path,
                                          "': ", std::strerror(errno))});
    return;
  }
  if (!S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) > kMaxConfigBytes) {
    errors.push_back({field, absl::StrCat("'", path, "' is not a PEM file (",
                                          S_ISDIR(st.st_mode) ? "a directory"
                                                              : "not a regular "
                                                                "file of a "
                                                                "sane size",
                                          ")")});
    return;
  }
  std::ifstream in(path);
  if (!in) {
    errors.push_back({field, absl::StrCat("cannot read '", path,
                                          "': ", std::strerror(errno))});
    return;
  }
  std::stringstream text;
  text << in.rdbuf();
  const std::string pem = text.str();
  const size_t begin = pem.find("-----BEGIN ");
  if (begin == std::string::npos ||
      pem.find(std::string(kind), begin) == std::string::npos) {
    errors.push_back(
        {field, absl::StrCat("'", path, "' holds no PEM ", kind, " block")});
  }
}

}  // namespace

std::vector<FieldError> CheckConfig(const v1::DaemonConfig& config) {
  std::vector<FieldError> errors;
  static constexpr const char* kLevels[] = {"trace", "debug",    "info", "warn",
                                            "error", "critical", "off"};
  if (!config.log_level().empty() &&
      std::find(std::begin(kLevels), std::end(kLevels), config.log_level()) ==
          std::end(kLevels)) {
    errors.push_back({"log_level",
                      absl::StrCat("'", config.log_level(),
                                   "' is not one of trace, debug, info, warn, "
                                   "error, critical, off")});
  }
  if (const std::string& t = config.transport();
      !t.empty() && t != "auto" && t != "verbs" && t != "tcp") {
    errors.push_back(
        {"transport", absl::StrCat("'", t, "' is not one of auto, verbs, tcp")});
  }
  if (const std::string& mode = config.socket_mode(); !mode.empty()) {
    const bool octal =
        mode.size() <= 4 &&
        mode.find_first_not_of("01234567") == std::string::npos &&
        (mode.size() < 4 || mode.front() == '0');
    if (!octal) {
      errors.push_back({"socket_mode", absl::StrCat("'", absl::CHexEscape(mode),
                                                    "' must be octal "
                                                    "permission bits "
                                                    "0..0777, e.g. 0660")});
    }
  }
  if (const std::string& socket = config.socket(); !socket.empty()) {
    // The session socket is this path + ".session"; both must fit in a
    // sockaddr_un.
    const size_t most =
        sizeof(sockaddr_un{}.sun_path) - 1 - std::strlen(".session");
    if (socket.front() != '/') {
      errors.push_back({"socket", absl::StrCat("'", absl::CHexEscape(socket),
                                               "' must be an absolute path")});
    } else if (socket.size() > most || socket.find('\0') != std::string::npos) {
      errors.push_back({"socket", absl::StrCat("the path is ", socket.size(),
                                               " bytes long; at most ", most,
                                               " fit in a Unix socket "
                                               "address (with \".session\")")});
    }
  }
  CheckGroup(config.socket_group(), errors);
  for (int i = 0; i < config.peer_allow_size(); ++i) {
    if (auto parsed = core::PeerAllowList::Parse({config.peer_allow(i)});
        !parsed.ok()) {
      errors.push_back(
          {"peer_allow", std::string(parsed.status().message()), i});
    }
  }
  const int tls_given = !config.tls_ca_file().empty() +
                        !config.tls_cert_file().empty() +
                        !config.tls_key_file().empty();
  if (tls_given != 0 && tls_given != 3) {
    for (const char* field : {"tls_ca_file", "tls_cert_file", "tls_key_file"}) {
      const auto* descriptor =
          v1::DaemonConfig::descriptor()->FindFieldByName(field);
      const auto* reflection = v1::DaemonConfig::GetReflection();
      if (reflection->GetString(config, descriptor).empty()) continue;
      errors.push_back({field,
                        "mutual TLS needs all of tls_ca_file, "
                        "tls_cert_file and tls_key_file (or none)"});
    }
  } else if (tls_given == 3) {
    CheckPemFile("tls_ca_file", config.tls_ca_file(), "CERTIFICATE", errors);
    CheckPemFile("tls_cert_file", config.tls_cert_file(), "CERTIFICATE",
                 errors);
    CheckPemFile("tls_key_file", config.tls_key_file(), "PRIVATE KEY", errors);
  }
  if (const std::string& device = config.device();
      !device.empty() && !IsDeviceName(device)) {
    errors.push_back({"device", NotADeviceName(device)});
  }
  CheckRails(config, errors);
  CheckChunkBytes("verbs_chunk_bytes", config.verbs_chunk_bytes(), "1 MiB",
                  errors);
  CheckChunkBytes("verbs_read_chunk_bytes", config.verbs_read_chunk_bytes(),
                  "64 KiB", errors);
  CheckAddress("peer_listen", config.peer_listen(), errors);
  CheckAddress("data_listen", config.data_listen(), errors);
  if (!config.advertise_address().empty()) {
    if (absl::Status s = ValidatePeerAddress(config.advertise_address(),
                                             /*listen=*/false);
        !s.ok()) {
      errors.push_back({"advertise_address", std::string(s.message())});
    }
  }
  if (MetricsEnabled(config)) {
    CheckAddress("metrics_listen", config.metrics_listen(), errors);
  }
  if (const std::string& dir = config.state_dir();
      !dir.empty() && dir.front() != '/') {
    errors.push_back({"state_dir", absl::StrCat("'", dir,
                                                "' must be an absolute path")});
  }
  CheckAtMost("qps_per_peer", config.qps_per_peer(), 64, "", errors);
  CheckAtMost("qp_max_send_wr", config.qp_max_send_wr(), 16384, "", errors);
  if (config.has_qp_timeout()) {
    CheckAtMost("qp_timeout", config.qp_timeout(), 31, " (4.096 us * 2^n)",
                errors);
  }
  if (config.has_qp_retry_cnt()) {
    CheckAtMost("qp_retry_cnt", config.qp_retry_cnt(), 7, "", errors);
  }
  if (config.has_qp_rnr_retry()) {
    CheckAtMost("qp_rnr_retry", config.qp_rnr_retry(), 7, " (7 = infinite)",
                errors);
  }
  CheckAtMost("io_threads", config.io_threads(), 64, "", errors);
  CheckAtMost("max_peers", config.max_peers(), 1u << 20, "", errors);
  CheckAtMost("max_peers_per_uid", config.max_peers_per_uid(),
              config.max_peers() != 0 ? config.max_peers() : kDefaultMaxPeers,
              " (max_peers)", errors);
  CheckAtMost("new_peers_per_second_per_uid",
              config.new_peers_per_second_per_uid(), 1u << 20, "", errors);
  CheckAtMost("new_peers_burst_per_uid", config.new_peers_burst_per_uid(),
              1u << 20, "", errors);
  CheckAtMost("handshakes_in_flight", config.handshakes_in_flight(), 4096, "",
              errors);
  CheckAtMost("handshakes_served_in_flight",
              config.handshakes_served_in_flight(), 4096, "", errors);
  CheckAtMost("peer_channel_idle_ms", config.peer_channel_idle_ms(), 86400000,
              " (a day)", errors);
  CheckAtMost("engine_threads", config.engine_threads(), 64, "", errors);
  CheckAtMost("engine_spin_us", config.engine_spin_us(), 1000000, " (1 s)",
              errors);
  if (config.loop_slice_us() != 0 &&
      (config.loop_slice_us() < 100 || config.loop_slice_us() > 100000)) {
    errors.push_back({"loop_slice_us",
                      absl::StrCat(config.loop_slice_us(),
                                   " must be 0 (100) or 100..100000: the "
                                   "slices the kernel takes, in us")});
  }
  CheckAtMost("notification_backlog", config.notification_backlog(), 1u << 22,
              " (about 400 MiB per uid)", errors);
  CheckDirectory(config, errors);
  return errors;
}

absl::Status ValidateConfig(const v1::DaemonConfig& config,
                            const std::string& source) {
  std::vector<std::string> lines;
  for (const FieldError& e : CheckConfig(config)) {
    lines.push_back(absl::StrCat("field '", e.field, "': ", e.message));
  }
  if (lines.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": ", absl::StrJoin(lines, "; ")));
}
}  // namespace rdmad::config
