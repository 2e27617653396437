#include "daemon/directory/directory_config.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/directory_url.h"
#include "common/status_macros.h"

namespace rdmad::directory {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& field,
                                     const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": cannot read ", path, ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().size() > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, " is larger than 1 MiB"));
  }
  return text.str();
}

absl::StatusOr<std::string> ReadPem(const std::string& field,
                                    const std::string& path) {
  if (path.empty()) return std::string();
  RDMAD_ASSIGN_OR_RETURN(std::string text, ReadFile(field, path));
  if (text.find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, " is not a PEM file"));
  }
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdDirectory>> CreateFromConfig(
    const v1::DaemonConfig& config, const v1::DirectoryNodeRecord& self,
    const std::string& identity, const core::RegionTable* regions) {
  if (config.directory().empty()) return nullptr;
  DirectoryOptions options;
  RDMAD_ASSIGN_OR_RETURN(options.etcd.endpoints,
                         ParseDirectoryUrl(config.directory()));
  RDMAD_ASSIGN_OR_RETURN(options.etcd.ca_pem,
                         ReadPem("directory_tls_ca_file",
                                 config.directory_tls_ca_file()));
  RDMAD_ASSIGN_OR_RETURN(options.etcd.cert_pem,
                         ReadPem("directory_tls_cert_file",
                                 config.directory_tls_cert_file()));
  RDMAD_ASSIGN_OR_RETURN(options.etcd.key_pem,
                         ReadPem("directory_tls_key_file",
                                 config.directory_tls_key_file()));
  if (!config.directory_user().empty()) {
    options.etcd.user = config.directory_user();
    RDMAD_ASSIGN_OR_RETURN(std::string password,
                           ReadFile("directory_password_file",
                                    config.directory_password_file()));
    // One line; the newline an editor adds is not part of it.
    options.etcd.password =
        std::string(absl::StripTrailingAsciiWhitespace(password));
  }
  if (!config.directory_prefix().empty()) {
    options.prefix = config.directory_prefix();
  }
  if (config.directory_lease_ttl_seconds() != 0) {
    options.lease_ttl = absl::Seconds(config.directory_lease_ttl_seconds());
  }
  options.node_record = self;
  options.identity = identity;
  return EtcdDirectory::Create(std::move(options), regions);
}

std::string UnprotectedNamesWarning(const v1::DaemonConfig& config,
                                    bool mutual_tls) {
  if (config.directory().empty() || mutual_tls ||
      !config.directory_user().empty() ||
      !config.directory_tls_cert_file().empty()) {
    return "";
  }
  return absl::StrCat(
      "the cluster directory ", config.directory(),
      " is configured with neither etcd authentication (directory_user, or "
      "directory_tls_cert_file) nor mutual TLS between daemons (tls_*): "
      "anyone who can write to that etcd can claim this cluster's region "
      "names, and transfers by name go to whoever claimed them",
      config.peer_allow().empty()
          ? " (peer_allow is empty too, so from any address)"
          : " (if their daemon's address is inside peer_allow)",
      "; see docs/DIRECTORY.md, \"Trust\"");
}

}  // namespace rdmad::directory
