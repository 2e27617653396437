#include "common/region_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/size.h"
#include "common/status_macros.h"

namespace rdmad {

absl::Status ValidateRegionName(absl::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError("region name is empty");
  }
  if (name.size() > kMaxRegionNameLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "region name is ", name.size(), " characters long; the limit is ",
        kMaxRegionNameLength));
  }
  if (name.front() == '.' || name.front() == '-') {
    return absl::InvalidArgumentError(absl::StrCat(
        "region name '", name, "' must not start with '.' or '-'"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          "region name '", name, "' contains '", std::string(1, c),
          "': use only letters, digits, '.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

namespace {

// An address as it may appear in a message: the start of it, with anything
// unprintable (an embedded NUL, a newline) escaped, so that a hostile
// value can neither flood a log nor forge lines in it.
std::string Shown(absl::string_view text) {
  constexpr size_t kShown = 64;
  std::string out = absl::CHexEscape(text.substr(0, kShown));
  if (text.size() > kShown) absl::StrAppend(&out, "...");
  return out;
}

// A DNS host name: dot-separated labels of letters, digits, '-' and '_'
// (service names use it), 1..63 characters each, not starting or ending
// with '-'; 253 characters at most in all.
bool IsHostName(absl::string_view host) {
  if (host.empty() || host.size() > kMaxHostLength) return false;
  size_t label = 0;
  for (size_t i = 0; i <= host.size(); ++i) {
    if (i == host.size() || host[i] == '.') {
      if (label == 0 || label > 63) return false;
      if (host[i - 1] == '-' || host[i - label] == '-') return false;
      label = 0;
      continue;
    }
    const char c = host[i];
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' &&
        c != '_') {
      return false;
    }
    ++label;
  }
  return true;
}

bool IsIpv4(absl::string_view host) {
  in_addr v4{};
  return ::inet_pton(AF_INET, std::string(host).c_str(), &v4) == 1;
}

// An IPv6 literal, optionally with a zone ("fe80::1%eth0").
bool IsIpv6(absl::string_view host) {
  absl::string_view zone;
  if (const size_t percent = host.find('%');
      percent != absl::string_view::npos) {
    zone = host.substr(percent + 1);
    host = host.substr(0, percent);
    if (zone.empty() || zone.size() > 15 ||
        !std::all_of(zone.begin(), zone.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
                 c == '.' || c == '_' || c == '-';
        })) {
      return false;
    }
  }
  in6_addr v6{};
  return ::inet_pton(AF_INET6, std::string(host).c_str(), &v6) == 1;
}

}  // namespace

absl::Status ValidatePeerAddress(absl::string_view peer,
                                 bool is_listen_address) {
  if (peer.size() > kMaxPeerAddressLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer address '", Shown(peer), "' is ", peer.size(),
        " characters long; a HOST:PORT is at most ", kMaxPeerAddressLength));
  }
  absl::string_view host;
  absl::string_view port;
  bool bracketed = false;
  if (!peer.empty() && peer.front() == '[') {
    const size_t close = peer.find(']');
    if (close == absl::string_view::npos || close + 1 >= peer.size() ||
        peer[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrCat(
          "peer address '", Shown(peer), "' must look like [IPV6]:PORT"));
    }
    host = peer.substr(1, close - 1);
    port = peer.substr(close + 2);
    bracketed = true;
  } else {
    const size_t colon = peer.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "peer address '", Shown(peer), "' has no port: use HOST:PORT"));
    }
    host = peer.substr(0, colon);
    port = peer.substr(colon + 1);
    if (host.find(':') != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("peer address '", Shown(peer),
                       "': bracket IPv6 hosts, e.g. [::1]:7471"));
    }
  }
  // Only the bytes a host may have: anything else (a NUL, which C strings
  // would silently cut at; spaces; control bytes) is refused before
  // inet_pton sees it.
  const bool clean = std::all_of(host.begin(), host.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
           c == '-' || c == '_' || c == ':' || c == '%';
  });
  const bool host_ok =
      clean && (bracketed ? IsIpv6(host) : IsIpv4(host) || IsHostName(host));
  if (!host_ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer address '", Shown(peer), "': '", Shown(host),
        "' is not a host: use an IPv4 address, a bracketed IPv6 address or "
        "a host name (letters, digits, '-', '.'; no spaces)"));
  }
  // Digits only: SimpleAtoi alone would take " 80" or "+80".
  uint32_t port_number = 0;
  const bool digits =
      !port.empty() && port.size() <= 5 &&
      std::all_of(port.begin(), port.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      });
  if (!digits || !absl::SimpleAtoi(port, &port_number) ||
      (port_number == 0 && !is_listen_address) || port_number > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", Shown(peer), "' needs a host and a port in ",
                     is_listen_address ? "0..65535" : "1..65535"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RegionAddress> ParseRegionAddress(absl::string_view text) {
  RegionAddress address;
  absl::string_view rest = text;
  // Names never contain '/', so the first '/' ends the peer part.
  const size_t slash = rest.find('/');
  if (slash != absl::string_view::npos) {
    address.peer = std::string(rest.substr(0, slash));
    rest = rest.substr(slash + 1);
    RDMAD_RETURN_IF_ERROR(ValidatePeerAddress(address.peer));
  }
  const size_t at = rest.rfind('@');
  if (at != absl::string_view::npos) {
    auto offset = ParseSize(rest.substr(at + 1));
    if (!offset.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad offset in region address '", text, "': ",
          offset.status().message()));
    }
    address.offset = *offset;
    rest = rest.substr(0, at);
  }
  address.name = std::string(rest);
  absl::Status name_ok = ValidateRegionName(address.name);
  if (!name_ok.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad region address '", text, "' (expected [HOST:PORT/]NAME[@OFFSET]): ",
        name_ok.message()));
  }
  return address;
}

}  // namespace rdmad
