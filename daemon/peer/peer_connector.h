// PeerConnector: how the peer layer reaches other daemons' Peer services —
// the seam between the peer layer's logic (state machines, caches, retries;
// unit-tested with a fake) and gRPC plus the transports' Connectors
// (GrpcPeerConnector).
#ifndef RDMAD_DAEMON_PEER_PEER_CONNECTOR_H_
#define RDMAD_DAEMON_PEER_PEER_CONNECTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/core/export_access_list.h"
#include "daemon/core/transfer.h"
#include "daemon/core/transport_kind.h"
#include "daemon/transport/transport.h"

namespace rdmad::peer {

// An exported region name to resolve for a transfer of local `uid`.
struct NameRequest {
  std::string name;
  uint32_t uid = 0;
};

// A name the peer resolved in its Hello answer, or why not.
struct ResolvedName {
  NameRequest request;
  absl::StatusOr<core::RemoteRegionInfo> region;
};

// What the first exchange with a peer carries besides Hello itself, so
// that one round trip makes the peer ready (rdmad.v1.HelloRequest).
struct Handshake {
  // Data channels to propose, best first; empty: Hello alone (the caller
  // still has a channel to this peer that may be reused).
  std::vector<core::TransportKind> propose;
  // Names the waiting transfers need (at most kMaxHelloNames).
  std::vector<NameRequest> names;
  // The call's deadline (the connector's rpc_timeout bounds it too).
  absl::Time deadline = absl::InfiniteFuture();
};
inline constexpr size_t kMaxHelloNames = 16;

// What a peer said in Peer.Hello.
struct HelloReply {
  uint64_t incarnation = 0;
  std::vector<core::TransportKind> transports;  // what it offers, best first
  // Who answered, as the channel verified it: the address it answered
  // from and, with mutual TLS, the names in its certificate.
  core::PeerIdentity identity;
  // The channel built from the proposal the peer accepted (kind
  // `channel_kind`); null when none was proposed, the peer accepted none
  // (`connect_status` says why) or it predates proposals (OK).
  std::shared_ptr<transport::DataChannel> channel;
  core::TransportKind channel_kind = core::TransportKind::kNone;
  absl::Status connect_status;
  // The peer's answer for each of Handshake::names; empty when it
  // predates resolving in Hello.
  std::vector<ResolvedName> names;
};

template <typename T>
using Callback = absl::AnyInvocable<void(absl::StatusOr<T>)>;

// Thread-safe. Every call completes its callback exactly once, from any
// thread (possibly inline). Failures to reach the peer at all are
// UNAVAILABLE naming it; its answers keep their codes.
class PeerConnector {
 public:
  virtual ~PeerConnector() = default;

  // Whether this daemon can open channels of `kind` now; `why` says why
  // not (verbs: no usable RDMA port).
  virtual bool CanUse(core::TransportKind kind, std::string* why) const = 0;

  // Peer.Hello to the daemon at `address`, carrying `handshake`'s
  // proposals (through the transports' Connectors) and names. A peer that
  // is too busy to answer now says RESOURCE_EXHAUSTED: retry later.
  virtual void Hello(const std::string& address, Handshake handshake,
                     Callback<HelloReply> done) = 0;

  // Peer.Connect through the `kind` transport's Connector: a data channel
  // to the run of the peer that answered Hello with `incarnation`
  // (UNAVAILABLE if it restarted since).
  virtual void Connect(
      const std::string& address, core::TransportKind kind,
      uint64_t incarnation,
      Callback<std::shared_ptr<transport::DataChannel>> done) = 0;

  // Peer.Resolve of an exported region name, for a transfer of local `uid`.
  virtual void Resolve(const std::string& address, const std::string& name,
                       uint32_t uid, Callback<core::RemoteRegionInfo> done) = 0;

  // Forgets what is kept for `address` (its gRPC channel): after a failure,
  // so the next Hello starts afresh, or when the peer is evicted.
  virtual void Forget(const std::string& address) = 0;
};

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_PEER_CONNECTOR_H_
