#include "daemon/core/peer_allow_list.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rdmad::core {
namespace {

// Parses an IPv4 or IPv6 address into IPv4-mapped-IPv6 form. Returns the
// number of meaningful bits (32 for IPv4, 128 for IPv6), or 0 on error.
int ParseIp(absl::string_view text, std::array<uint8_t, 16>* out) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  const std::string s(text);
  in_addr v4{};
  if (::inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    out->fill(0);
    (*out)[10] = 0xff;
    (*out)[11] = 0xff;
    std::memcpy(out->data() + 12, &v4, 4);
    return 32;
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
    std::memcpy(out->data(), &v6, 16);
    return 128;
  }
  return 0;
}

bool PrefixMatches(const std::array<uint8_t, 16>& a,
                   const std::array<uint8_t, 16>& b, int prefix) {
  int i = 0;
  for (; prefix >= 8; prefix -= 8, ++i) {
    if (a[i] != b[i]) return false;
  }
  if (prefix == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - prefix));
  return (a[i] & mask) == (b[i] & mask);
}

}  // namespace

absl::StatusOr<PeerAllowList> PeerAllowList::Parse(
    const std::vector<std::string>& entries) {
  PeerAllowList list;
  for (const std::string& entry : entries) {
    absl::string_view address = entry;
    absl::string_view prefix_text;
    if (size_t slash = address.find('/'); slash != absl::string_view::npos) {
      prefix_text = address.substr(slash + 1);
      address = address.substr(0, slash);
    }
    Block block;
    block.text = entry;
    const int bits = ParseIp(address, &block.bytes);
    if (bits == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "peer_allow entry '", entry, "' is not an IP address or CIDR block "
          "(e.g. 10.0.0.0/8, 192.0.2.7, fd00::/8)"));
    }
    int prefix = bits;
    if (!prefix_text.empty() || absl::EndsWith(entry, "/")) {
      if (!absl::SimpleAtoi(prefix_text, &prefix) || prefix < 0 ||
          prefix > bits) {
        return absl::InvalidArgumentError(absl::StrCat(
            "peer_allow entry '", entry, "': the prefix length must be 0..",
            bits));
      }
    }
    // IPv4 prefixes count within the last 32 bits of the mapped form.
    block.prefix = bits == 32 ? 96 + prefix : prefix;
    list.blocks_.push_back(std::move(block));
  }
  return list;
}

bool PeerAllowList::Allows(const std::array<uint8_t, 16>& address) const {
  if (blocks_.empty()) return true;
  for (const Block& block : blocks_) {
    if (PrefixMatches(block.bytes, address, block.prefix)) return true;
  }
  return false;
}

bool PeerAllowList::AllowsAddress(absl::string_view address) const {
  if (blocks_.empty()) return true;
  std::array<uint8_t, 16> bytes{};
  if (ParseIp(address, &bytes) == 0) return false;
  return Allows(bytes);
}

bool PeerAllowList::AllowsSockaddr(const sockaddr_storage& address) const {
  if (blocks_.empty()) return true;
  std::array<uint8_t, 16> bytes{};
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    bytes[10] = 0xff;
    bytes[11] = 0xff;
    std::memcpy(bytes.data() + 12, &in->sin_addr, 4);
  } else if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    std::memcpy(bytes.data(), &in6->sin6_addr, 16);
  } else {
    return false;
  }
  return Allows(bytes);
}

bool PeerAllowList::AllowsGrpcPeer(absl::string_view peer) const {
  if (blocks_.empty()) return true;
  absl::string_view rest;
  if (absl::StartsWith(peer, "ipv4:")) {
    rest = peer.substr(5);
  } else if (absl::StartsWith(peer, "ipv6:")) {
    rest = peer.substr(5);
  } else {
    return false;
  }
  // Strip ":PORT" (IPv6 addresses are bracketed, so the last colon is it).
  const size_t colon = rest.rfind(':');
  if (colon == absl::string_view::npos) return false;
  absl::string_view host = rest.substr(0, colon);
  // gRPC may percent-encode the brackets' zone id; a zone never matches.
  return AllowsAddress(host);
}

std::string PeerAllowList::ToString() const {
  if (blocks_.empty()) return "any";
  return absl::StrJoin(blocks_, ", ", [](std::string* out, const Block& b) {
    out->append(b.text);
  });
}

}  // namespace rdmad::core
