#include "daemon/config/resolved_config.h"

#include <grp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/config/certificate_identity.h"
#include "daemon/config/config_file.h"

namespace rdmad::config {

absl::StatusOr<int64_t> ResolveSocketGroup(const std::string& group) {
  if (group.empty()) return -1;
  uint32_t gid = 0;
  // Digits only: SimpleAtoi alone would take " 5" or "+5".
  if (std::all_of(group.begin(), group.end(),
                  [](char c) {
                    return absl::ascii_isdigit(static_cast<unsigned char>(c));
                  }) &&
      absl::SimpleAtoi(group, &gid)) {
    return gid;
  }
  std::vector<char> buffer(16384);
  for (;;) {
    ::group entry{};
    ::group* found = nullptr;
    const int rc = ::getgrnam_r(group.c_str(), &entry, buffer.data(),
                                buffer.size(), &found);
    if (rc == ERANGE && buffer.size() < (1u << 20)) {
      buffer.resize(buffer.size() * 4);
      continue;
    }
    if (found == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", absl::CHexEscape(group),
          "' is not a group on this host: create it (groupadd) or give a "
          "numeric gid"));
    }
    return static_cast<int64_t>(found->gr_gid);
  }
}

namespace {

absl::StatusOr<std::string> ReadPem(const std::string& what,
                                    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read ", what, " ", path, ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " is not a PEM file"));
  }
  return text.str();
}

absl::StatusOr<std::optional<PeerTls>> LoadPeerTls(
    const v1::DaemonConfig& config) {
  const int given = !config.tls_ca_file().empty() +
                    !config.tls_cert_file().empty() +
                    !config.tls_key_file().empty();
  if (given == 0) return std::nullopt;
  if (given != 3) {
    return absl::InvalidArgumentError(
        "mutual TLS needs all of tls_ca_file, tls_cert_file and tls_key_file");
  }
  PeerTls tls;
  RDMAD_ASSIGN_OR_RETURN(tls.ca, ReadPem("tls_ca_file", config.tls_ca_file()));
  RDMAD_ASSIGN_OR_RETURN(tls.cert,
                         ReadPem("tls_cert_file", config.tls_cert_file()));
  RDMAD_ASSIGN_OR_RETURN(tls.key,
                         ReadPem("tls_key_file", config.tls_key_file()));
  // The cluster directory binds this daemon's records to it; without a
  // directory nothing needs it.
  auto identity = CertificateIdentity(tls.cert);
  if (identity.ok()) {
    tls.identity = *std::move(identity);
  } else if (!config.directory().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tls_cert_file ", config.tls_cert_file(), ": ",
        identity.status().message(),
        " (with a cluster directory, this daemon's records name it)"));
  }
  return tls;
}

}  // namespace

absl::StatusOr<uint32_t> ParseMode(const std::string& text) {
  if (text.empty() || text.size() > 4 ||
      text.find_first_not_of("01234567") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("mode '", text, "' must be octal, e.g. 0660"));
  }
  uint32_t mode = 0;
  for (char c : text) mode = mode * 8 + static_cast<uint32_t>(c - '0');
  return mode;
}

absl::StatusOr<ResolvedConfig> ResolveConfig(const v1::DaemonConfig& config) {
  RDMAD_RETURN_IF_ERROR(ValidateConfig(config, "the configuration"));
  ResolvedConfig out;
  RDMAD_ASSIGN_OR_RETURN(out.socket_mode, ParseMode(config.socket_mode()));
  RDMAD_ASSIGN_OR_RETURN(out.socket_gid,
                         ResolveSocketGroup(config.socket_group()));
  RDMAD_ASSIGN_OR_RETURN(out.transport,
                         core::ParseTransportMode(config.transport()));
  RDMAD_ASSIGN_OR_RETURN(
      out.peer_allow, core::PeerAllowList::Parse({config.peer_allow().begin(),
                                                  config.peer_allow().end()}));
  RDMAD_ASSIGN_OR_RETURN(out.tls, LoadPeerTls(config));
  return out;
}

}  // namespace rdmad::config
