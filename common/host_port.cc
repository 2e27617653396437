#include "common/host_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rdmad {
namespace {

// Characters of host names ([A-Za-z0-9.-], '_' seen in the wild), IPv4
// and IPv6 literals (hex digits, '.', ':') and IPv6 zone ids ('%').
bool HostChar(char c) {
  return absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_' ||
         c == ':' || c == '%';
}

// For messages: the address with anything unprintable escaped.
std::string Shown(absl::string_view text) {
  std::string out;
  for (char c : text.substr(0, 80)) {
    if (absl::ascii_isprint(c)) {
      out.push_back(c);
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(static_cast<unsigned char>(c),
                                             absl::kZeroPad2));
    }
  }
  if (text.size() > 80) out += "...";
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

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address,
                                       AddressUse use) {
  if (address.size() > kMaxPeerAddressLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "address '", Shown(address), "' is ", address.size(),
        " characters long; a HOST:PORT is at most ", kMaxPeerAddressLength));
  }
  absl::string_view host;
  absl::string_view port;
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrCat(
          "address '", Shown(address), "' must look like [IPV6]:PORT"));
    }
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
    if (host.find(':') == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "address '", Shown(address),
          "': only IPv6 literals are bracketed; write HOST:PORT"));
    }
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "address '", Shown(address), "' has no port: use HOST:PORT"));
    }
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.find(':') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "address '", Shown(address),
          "': bracket IPv6 hosts, e.g. [::1]:7471"));
    }
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", Shown(address), "' has no host"));
  }
  if (host.size() > kMaxHostLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "address '", Shown(address), "': the host is ", host.size(),
        " characters long; the limit is ", kMaxHostLength));
  }
  for (char c : host) {
    if (!HostChar(c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "address '", Shown(address), "': '", Shown(host),
          "' is not a host: it contains '", Shown(absl::string_view(&c, 1)),
          "', which no host name or IP address has"));
    }
  }
  // Characters alone let "1.2.3", "a..b" or "::1::" through; each form
  // is checked whole, before any resolver or inet_pton sees it.
  const bool bracketed = address.front() == '[';
  if (bracketed ? !IsIpv6(host) : !(IsIpv4(host) || IsHostName(host))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "address '", Shown(address), "': '", Shown(host),
        "' is not a host: use an IPv4 address, a bracketed IPv6 address or "
        "a host name (letters, digits, '-', '.'; no spaces)"));
  }
  const bool listen = use == AddressUse::kListen;
  uint32_t number = 0;
  // SimpleAtoi accepts surrounding spaces and a sign; a port is digits.
  const bool digits =
      !port.empty() && port.size() <= 5 &&
      std::all_of(port.begin(), port.end(),
                  [](char c) { return absl::ascii_isdigit(c); });
  if (!digits || !absl::SimpleAtoi(port, &number) || number > 65535 ||
      (number == 0 && !listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "address '", Shown(address), "' needs a port in ",
        listen ? "0..65535" : "1..65535"));
  }
  return HostPort{std::string(host), static_cast<uint16_t>(number)};
}

std::string JoinHostPort(absl::string_view host, uint16_t port) {
  if (host.find(':') != absl::string_view::npos) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

bool IsWildcardHost(absl::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

}  // namespace rdmad
