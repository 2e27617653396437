// PeerAllowList: which remote daemons may reach this one, by IP address or
// CIDR block. Checked on every Peer gRPC call and on every accepted TCP data
// connection. An empty list allows everyone (the default; mutual TLS and
// firewalls are the other layers, see docs/SECURITY.md).
//
// Example:
//   auto allow = PeerAllowList::Parse({"10.0.0.0/8", "::1"});
//   if (!allow->AllowsGrpcPeer(context->peer())) ... PERMISSION_DENIED
//
// Immutable after Parse; thread-safe.
#ifndef RDMAD_DAEMON_CORE_PEER_ALLOW_LIST_H_
#define RDMAD_DAEMON_CORE_PEER_ALLOW_LIST_H_

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdmad::core {

class PeerAllowList {
 public:
  // Everyone allowed.
  PeerAllowList() = default;

  // Entries are "ADDRESS" or "ADDRESS/PREFIX", IPv4 or IPv6. IPv4 entries
  // also match IPv4-mapped IPv6 addresses (::ffff:a.b.c.d), which is how a
  // dual-stack listener sees IPv4 peers. INVALID_ARGUMENT names the entry.
  static absl::StatusOr<PeerAllowList> Parse(
      const std::vector<std::string>& entries);

  bool empty() const { return blocks_.empty(); }

  // A textual IP address ("10.1.2.3", "::1", "[::1]").
  bool AllowsAddress(absl::string_view address) const;
  // A socket address as from getpeername (AF_INET / AF_INET6).
  bool AllowsSockaddr(const sockaddr_storage& address) const;
  // grpc::ServerContext::peer(): "ipv4:10.1.2.3:5555", "ipv6:[::1]:5555".
  // Anything else (e.g. "unix:") is refused unless the list is empty.
  bool AllowsGrpcPeer(absl::string_view peer) const;

  std::string ToString() const;

 private:
  struct Block {
    std::array<uint8_t, 16> bytes{};  // IPv4 as IPv4-mapped IPv6
    int prefix = 128;                 // bits of `bytes` that must match
    std::string text;
  };
  bool Allows(const std::array<uint8_t, 16>& address) const;

  std::vector<Block> blocks_;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_PEER_ALLOW_LIST_H_
