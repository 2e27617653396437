#include "daemon/peer/peer_identity.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/auth_context.h"

namespace rdmad::peer {

std::string AddressOfGrpcPeer(absl::string_view peer) {
  absl::string_view rest;
  if (absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:")) {
    rest = peer.substr(5);
  } else {
    return "";
  }
  // Strip ":PORT" (IPv6 addresses are bracketed, so the last colon is it).
  const size_t colon = rest.rfind(':');
  if (colon == absl::string_view::npos) return "";
  absl::string_view host = rest.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::string(host);
}

namespace {

core::PeerIdentity IdentityOf(
    absl::string_view peer,
    const std::shared_ptr<const grpc::AuthContext>& auth) {
  core::PeerIdentity identity;
  identity.address = AddressOfGrpcPeer(peer);
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return identity;
  for (const char* property :
       {GRPC_X509_CN_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME,
        GRPC_PEER_DNS_PROPERTY_NAME, GRPC_PEER_URI_PROPERTY_NAME}) {
    for (const grpc::string_ref& value : auth->FindPropertyValues(property)) {
      std::string name(value.data(), value.size());
      if (std::find(identity.certificate_names.begin(),
                    identity.certificate_names.end(),
                    name) == identity.certificate_names.end()) {
        identity.certificate_names.push_back(std::move(name));
      }
    }
  }
  return identity;
}

}  // namespace

core::PeerIdentity PeerIdentityOf(const grpc::ServerContextBase& context) {
  return IdentityOf(context.peer(), context.auth_context());
}

core::PeerIdentity PeerIdentityOf(const grpc::ClientContext& context) {
  return IdentityOf(context.peer(), context.auth_context());
}

std::string DescribePeer(const core::PeerIdentity& peer) {
  std::string out = peer.address.empty() ? "(unknown address)" : peer.address;
  if (!peer.certificate_names.empty()) {
    absl::StrAppend(&out, " (certificate ",
                    absl::StrJoin(peer.certificate_names, ", "), ")");
  }
  return out;
}

}  // namespace rdmad::peer
