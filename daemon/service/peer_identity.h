// Who is calling on the Peer service, as gRPC verified it: the address the
// call came from and, with mutual TLS, the names in the peer daemon's
// verified client certificate. What export access lists are checked
// against (core/export_access_list.h).
#ifndef RDMAD_DAEMON_SERVICE_PEER_IDENTITY_H_
#define RDMAD_DAEMON_SERVICE_PEER_IDENTITY_H_

#include <string>

#include "absl/strings/string_view.h"
#include "daemon/core/export_access_list.h"
#include "grpcpp/server_context.h"

namespace rdmad::service {

// The IP address in a gRPC peer string ("ipv4:10.1.2.3:5555" -> "10.1.2.3",
// "ipv6:[::1]:5555" -> "::1"); "" for anything else (e.g. "unix:").
std::string AddressOfGrpcPeer(absl::string_view peer);

// The identity of the caller of `context`. Certificate names are taken only
// from an authenticated peer (IsPeerAuthenticated), i.e. a client
// certificate the CA verified: its common name and DNS/URI subjectAltNames.
core::PeerIdentity PeerIdentityOf(const grpc::ServerContextBase& context);

// "127.0.0.1" or "127.0.0.1 (certificate node-b)" for messages.
std::string DescribePeer(const core::PeerIdentity& peer);

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_PEER_IDENTITY_H_
