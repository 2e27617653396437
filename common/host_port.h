// HOST:PORT: the one parser of network addresses in rdmad (peer addresses,
// listen addresses, data endpoints).
//
//   "10.0.0.2:7471"     host "10.0.0.2", port 7471
//   "node7:7471"        host names are allowed (resolved where dialled)
//   "[fe80::1]:7471"    IPv6 literals are bracketed
//   "0.0.0.0:0"         listen addresses may use port 0 (any free port)
#ifndef RDMAD_COMMON_HOST_PORT_H_
#define RDMAD_COMMON_HOST_PORT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdmad {

struct HostPort {
  std::string host;  // without IPv6 brackets
  uint16_t port = 0;
};

// Longest host accepted (DNS names are at most 253 characters), and the
// longest HOST:PORT: brackets, colon and five digits on top.
inline constexpr size_t kMaxHostLength = 253;
inline constexpr size_t kMaxPeerAddressLength = kMaxHostLength + 2 + 6;

enum class AddressUse {
  kDial,    // a peer to connect to: port 1..65535
  kListen,  // an address to bind: port 0..65535 (0: any free port)
};

// Parses "HOST:PORT" or "[IPV6]:PORT". INVALID_ARGUMENT, saying what is
// wrong, for anything else: no port, an unbracketed IPv6 host, an empty or
// oversized host, characters no host name or IP literal has (spaces,
// control characters, NUL...), a port out of range.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address,
                                       AddressUse use = AddressUse::kDial);

// "HOST:PORT", bracketing IPv6 literals.
std::string JoinHostPort(absl::string_view host, uint16_t port);

// True for "", "0.0.0.0", "::" and "[::]": listen on every address.
bool IsWildcardHost(absl::string_view host);

}  // namespace rdmad

#endif  // RDMAD_COMMON_HOST_PORT_H_
