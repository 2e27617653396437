#include "daemon/core/holder_trust.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rdmad::core {
namespace {

std::string NotSending(const std::string& name, const std::string& node) {
  return absl::StrCat("not sending to region '", name,
                      "' by name: the cluster directory lists it on ", node);
}

}  // namespace

absl::Status HolderTrust::CheckRecord(const DirectoryEntry& entry) const {
  if (!mutual_tls_ || !entry.identity.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      NotSending(entry.name, entry.node),
      " in a record that names no certificate identity; this daemon uses "
      "mutual TLS and sends bytes by name only to a holder whose record "
      "names the certificate it presents (the record was written by an "
      "rdmad without tls_cert_file, or not by rdmad)"));
}

absl::Status HolderTrust::CheckHolder(const std::string& name,
                                      const std::string& node,
                                      const std::string& identity,
                                      const PeerIdentity* presented) const {
  if (!checks_holders()) return absl::OkStatus();
  if (presented == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat(NotSending(name, node),
                     ", and this daemon does not know who answered there"));
  }
  if (!allow_.empty() && (presented->address.empty() ||
                          !allow_.AllowsAddress(presented->address))) {
    return absl::PermissionDeniedError(absl::StrCat(
        NotSending(name, node), ", which answered from ",
        presented->address.empty() ? "an unknown address" : presented->address,
        ", outside peer_allow (", allow_.ToString(),
        "): a holder outside the allow-list is not trusted for names"));
  }
  if (mutual_tls_ && (identity.empty() ||
                      std::find(presented->certificate_names.begin(),
                                presented->certificate_names.end(), identity) ==
                          presented->certificate_names.end())) {
    return absl::PermissionDeniedError(absl::StrCat(
        NotSending(name, node), " with certificate identity '", identity,
        "', but ", node,
        presented->certificate_names.empty()
            ? " presented no verified certificate"
            : absl::StrCat(" presented a certificate for '",
                           absl::StrJoin(presented->certificate_names, "', '"),
                           "'"),
        ": the record does not belong to the daemon that answers there"));
  }
  return absl::OkStatus();
}

}  // namespace rdmad::core
