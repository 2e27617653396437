// The identity a daemon's mutual-TLS certificate gives it in the cluster
// directory: what its region records name, and what other daemons require
// its Peer service to present before they send it bytes by name
// (core/holder_trust.h). The same names `cert:NAME` in export access lists
// match: the certificate's common name or a DNS/URI subjectAltName.
#ifndef RDMAD_DAEMON_CONFIG_CERTIFICATE_IDENTITY_H_
#define RDMAD_DAEMON_CONFIG_CERTIFICATE_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"

namespace rdmad::config {

// The first certificate in `pem`: its subject's common name, else its first
// DNS subjectAltName, else its first URI subjectAltName. INVALID_ARGUMENT
// when `pem` holds no certificate, or one with none of those names.
absl::StatusOr<std::string> CertificateIdentity(const std::string& pem);

}  // namespace rdmad::config

#endif  // RDMAD_DAEMON_CONFIG_CERTIFICATE_IDENTITY_H_
