// Who is at the other end of a Peer-service call, as gRPC verified it: the
// address and, with mutual TLS, the names in the other daemon's verified
// certificate. On the server side that is the caller, what export access
// lists are checked against (core/export_access_list.h); on the client
// side it is the daemon that answered, what the cluster directory's trust
// rules are checked against (core/holder_trust.h).
#ifndef RDMAD_DAEMON_PEER_PEER_IDENTITY_H_
#define RDMAD_DAEMON_PEER_PEER_IDENTITY_H_

#include <string>

#include "absl/strings/string_view.h"
#include "daemon/core/export_access_list.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"

namespace rdmad::peer {

// The IP address in a gRPC peer string ("ipv4:10.1.2.3:5555" -> "10.1.2.3",
// "ipv6:[::1]:5555" -> "::1"); "" for anything else (e.g. "unix:").
std::string AddressOfGrpcPeer(absl::string_view peer);

// The identity of the other end of `context`'s call. Certificate names are
// taken only from an authenticated peer (IsPeerAuthenticated), i.e. a
// certificate the CA verified: its common name and DNS/URI
// subjectAltNames. A client context knows them once the call has
// completed.
core::PeerIdentity PeerIdentityOf(const grpc::ServerContextBase& context);
core::PeerIdentity PeerIdentityOf(const grpc::ClientContext& context);

// "127.0.0.1" or "127.0.0.1 (certificate node-b)" for messages.
std::string DescribePeer(const core::PeerIdentity& peer);

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_PEER_IDENTITY_H_
