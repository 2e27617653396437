#include "daemon/core/export_access_list.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rdmad::core {
namespace {

constexpr absl::string_view kCertPrefix = "cert:";
// Longest certificate name accepted: a DNS name is at most 253 characters;
// URIs (SPIFFE IDs) get more room.
constexpr size_t kMaxCertificateName = 512;

}  // namespace

absl::StatusOr<ExportAccessList> ExportAccessList::Parse(
    const std::vector<ExportGrant>& grants) {
  if (grants.size() > kMaxEntries) {
    return absl::InvalidArgumentError(
        absl::StrCat("an export access list has at most ", kMaxEntries,
                     " entries; ", grants.size(),
                     " were given: use CIDR blocks or certificate names "
                     "that cover several peers"));
  }
  ExportAccessList list;
  for (const ExportGrant& grant : grants) {
    Entry entry;
    entry.uid = grant.uid;
    const std::string& peer = grant.peer;
    if (peer == "*") {
      entry.kind = Entry::Kind::kAny;
    } else if (absl::StartsWith(peer, kCertPrefix)) {
      entry.kind = Entry::Kind::kCertificate;
      entry.certificate = peer.substr(kCertPrefix.size());
      const bool printable = std::all_of(
          entry.certificate.begin(), entry.certificate.end(), [](char c) {
            return absl::ascii_isgraph(static_cast<unsigned char>(c));
          });
      if (entry.certificate.empty() ||
          entry.certificate.size() > kMaxCertificateName || !printable) {
        return absl::InvalidArgumentError(absl::StrCat(
            "export access list entry '", FormatGrant(grant),
            "': a certificate name must be 1..", kMaxCertificateName,
            " printable characters without spaces, e.g. cert:node-b.example"));
      }
    } else {
      auto block = PeerAllowList::Parse({peer});
      if (!block.ok() || peer.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "export access list entry '", FormatGrant(grant),
            "': the peer must be '*', an IP address or CIDR block (10.0.0.2, "
            "10.0.0.0/8, ::1) or cert:NAME"));
      }
      entry.kind = Entry::Kind::kAddress;
      entry.block = *std::move(block);
    }
    list.entries_.push_back(std::move(entry));
    list.grants_.push_back(grant);
  }
  return list;
}

absl::StatusOr<ExportGrant> ExportAccessList::ParseGrantText(
    absl::string_view text) {
  ExportGrant grant;
  // The uid is before the first '@': neither addresses nor certificate
  // names of the PEER part need one before it.
  const size_t at = text.find('@');
  if (at != absl::string_view::npos) {
    uint32_t uid = 0;
    if (!absl::SimpleAtoi(text.substr(0, at), &uid) ||
        !absl::ascii_isdigit(static_cast<unsigned char>(text.front()))) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text,
                       "': the part before '@' must be a numeric uid, as in "
                       "1000@10.0.0.2"));
    }
    grant.uid = uid;
    text = text.substr(at + 1);
  }
  grant.peer = std::string(text);
  // Validates the PEER part.
  if (auto parsed = Parse({grant}); !parsed.ok()) return parsed.status();
  return grant;
}

std::string ExportAccessList::FormatGrant(const ExportGrant& grant) {
  return grant.uid.has_value() ? absl::StrCat(*grant.uid, "@", grant.peer)
                               : grant.peer;
}

bool ExportAccessList::PeerMatches(const Entry& entry,
                                   const PeerIdentity& peer) const {
  switch (entry.kind) {
    case Entry::Kind::kAny:
      return true;
    case Entry::Kind::kAddress:
      return !peer.address.empty() && entry.block.AllowsAddress(peer.address);
    case Entry::Kind::kCertificate:
      return std::find(peer.certificate_names.begin(),
                       peer.certificate_names.end(),
                       entry.certificate) != peer.certificate_names.end();
  }
  return false;
}

bool ExportAccessList::Admits(const PeerIdentity& peer,
                              std::optional<uint32_t> uid) const {
  if (entries_.empty()) return true;
  for (const Entry& entry : entries_) {
    if (!PeerMatches(entry, peer)) continue;
    if (!entry.uid.has_value() || entry.uid == uid) return true;
  }
  return false;
}

bool ExportAccessList::AdmitsAddress(const sockaddr_storage& address) const {
  if (entries_.empty()) return true;
  for (const Entry& entry : entries_) {
    if (entry.kind == Entry::Kind::kAny) return true;
    if (entry.kind == Entry::Kind::kAddress &&
        entry.block.AllowsSockaddr(address)) {
      return true;
    }
  }
  return false;
}

std::string ExportAccessList::ToString() const {
  if (grants_.empty()) return "any";
  return absl::StrJoin(grants_, ", ",
                       [](std::string* out, const ExportGrant& grant) {
                         out->append(FormatGrant(grant));
                       });
}

}  // namespace rdmad::core
