// ExportAccessList: which remote principals an export admits.
//
// A principal is a peer daemon and, optionally, the uid that daemon vouches
// for. The peer is known by what this daemon can verify itself: the
// address its connection comes from, or, with mutual TLS, the names in its
// verified certificate. The uid is what the calling daemon asserts for the
// local client it acts for (Peer.Resolve carries it); a daemon can lie
// about it, so a uid entry trusts that daemon's word, exactly as NFS trusts
// a client host's. An export without a list admits every peer that reaches
// this daemon (peer_allow, mutual TLS) and every uid.
//
// Each entry is a PEER and an optional UID; the text form is "[UID@]PEER":
//   PEER  "*"           any peer daemon
//         "10.0.0.2", "10.0.0.0/8", "::1", "fd00::/8"
//                       the address (or CIDR block) the peer connects from
//         "cert:NAME"   a peer whose verified mTLS certificate carries NAME
//                       as its common name or as a DNS/URI subjectAltName
//   UID   a decimal uid; absent = any uid that peer acts for
//
// Example:
//   auto list = ExportAccessList::Parse({{"10.0.0.2", 1000}, {"cert:b", {}}});
//   if (!list->Admits({.address = "10.0.0.2"}, 1000)) ... PERMISSION_DENIED
//
// Immutable after Parse; thread-safe.
#ifndef RDMAD_DAEMON_CORE_EXPORT_ACCESS_LIST_H_
#define RDMAD_DAEMON_CORE_EXPORT_ACCESS_LIST_H_

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/peer_allow_list.h"

namespace rdmad::core {

// One entry as given: PEER and optional UID (see above).
struct ExportGrant {
  std::string peer;
  std::optional<uint32_t> uid;

  friend bool operator==(const ExportGrant&, const ExportGrant&) = default;
};

// Who is calling on the Peer service, as this daemon verified it.
struct PeerIdentity {
  // The IP address the call came from ("10.0.0.2", "::1"); empty if the
  // transport did not say.
  std::string address;
  // Common name and subjectAltNames of the verified client certificate;
  // empty without mutual TLS.
  std::vector<std::string> certificate_names;
};

class ExportAccessList {
 public:
  // Most entries one export may carry.
  static constexpr size_t kMaxEntries = 64;

  // Admits everyone (no list).
  ExportAccessList() = default;

  // INVALID_ARGUMENT naming the entry for a malformed PEER, an empty or
  // oversized certificate name, or more than kMaxEntries entries.
  static absl::StatusOr<ExportAccessList> Parse(
      const std::vector<ExportGrant>& grants);

  // "[UID@]PEER" -> ExportGrant (the text form rdmactl takes).
  static absl::StatusOr<ExportGrant> ParseGrantText(absl::string_view text);
  static std::string FormatGrant(const ExportGrant& grant);

  bool empty() const { return entries_.empty(); }
  const std::vector<ExportGrant>& grants() const { return grants_; }

  // Whether an entry admits `peer` acting for `uid` (nullopt: the peer
  // vouched for no uid, which only entries without a UID admit).
  bool Admits(const PeerIdentity& peer, std::optional<uint32_t> uid) const;

  // The TCP data path: frames carry no uid and no certificate, so a
  // connection from `address` is admitted when an entry's PEER is "*" or an
  // address block containing it, whatever the entry's UID (the uid was
  // checked when the key was handed out, see docs/SECURITY.md).
  bool AdmitsAddress(const sockaddr_storage& address) const;

  // "1000@10.0.0.2, cert:b" for messages; "any" when empty.
  std::string ToString() const;

 private:
  struct Entry {
    enum class Kind { kAny, kAddress, kCertificate } kind = Kind::kAny;
    PeerAllowList block;      // kAddress: one address or CIDR block
    std::string certificate;  // kCertificate
    std::optional<uint32_t> uid;
  };
  bool PeerMatches(const Entry& entry, const PeerIdentity& peer) const;

  std::vector<Entry> entries_;
  std::vector<ExportGrant> grants_;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_EXPORT_ACCESS_LIST_H_
