// HolderTrust: which daemon this daemon sends bytes to for a region it found
// by name in the cluster directory (docs/DIRECTORY.md, "Trust").
//
// Anyone who can write to etcd can write a record, so a record alone never
// decides where bytes go: before a transfer by name leaves, the daemon that
// holds the name must be one this daemon would trust for it.
//   * With mutual TLS (tls_* set): the record must name the holder's
//     certificate identity (CheckRecord, before any connection), and the
//     holder's Peer service must present a certificate, verified against
//     the CA, that carries that identity as its common name or as a DNS/URI
//     subjectAltName (CheckHolder, once it has answered).
//   * With peer_allow: the address the holder's Peer service answered from
//     must be inside it (CheckHolder).
// With neither, every holder is trusted; the daemon says so at start when
// etcd has no authentication either.
//
// Example:
//   HolderTrust trust(/*mutual_tls=*/true, allow);
//   if (auto s = trust.CheckRecord(entry); !s.ok()) return s;  // no bytes
//   ...  // Hello to entry.node
//   if (auto s = trust.CheckHolder(entry.name, entry.node, entry.identity,
//                                  presented); !s.ok()) return s;
//
// Immutable; thread-safe.
#ifndef RDMAD_DAEMON_CORE_HOLDER_TRUST_H_
#define RDMAD_DAEMON_CORE_HOLDER_TRUST_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "daemon/core/export_access_list.h"
#include "daemon/core/peer_allow_list.h"
#include "daemon/core/region_resolver.h"

namespace rdmad::core {

class HolderTrust {
 public:
  // Trusts every holder.
  HolderTrust() = default;
  HolderTrust(bool mutual_tls, PeerAllowList allow)
      : mutual_tls_(mutual_tls), allow_(std::move(allow)) {}

  bool mutual_tls() const { return mutual_tls_; }
  // Whether CheckHolder can refuse anyone (else it need not be called).
  bool checks_holders() const { return mutual_tls_ || !allow_.empty(); }

  // The record alone: FAILED_PRECONDITION naming the region and its node
  // when mutual TLS is on and `entry` names no certificate identity.
  absl::Status CheckRecord(const DirectoryEntry& entry) const;

  // The holder as it answered: `presented` is the identity its Peer
  // service showed (the address it answered from and, with mutual TLS, the
  // names in its verified certificate); null if unknown. PERMISSION_DENIED
  // naming the region, the node and what did not match.
  absl::Status CheckHolder(const std::string& name, const std::string& node,
                           const std::string& identity,
                           const PeerIdentity* presented) const;

 private:
  bool mutual_tls_ = false;
  PeerAllowList allow_;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_HOLDER_TRUST_H_
