// PeerInspector: what this daemon asks other daemons on behalf of its
// local clients when they inspect remote regions (rdmactl regions --peer,
// rdmactl stat): Peer.ListExports and Peer.Resolve, forwarded.
//
// Separate from the peer table, which owns the data path: inspecting a
// peer must not create a peer entry, a handshake or a data channel, so a
// mistyped address leaves nothing behind. Calls use the gRPC callback API:
// no thread waits for an answer. Channels are cached per address (a few
// dozen at most) and reconnect by themselves.
//
// Example:
//   PeerInspector inspector(credentials);
//   inspector.ListExports("10.0.0.2:7471", request, deadline,
//                         [](absl::StatusOr<v1::ListExportsResponse> r) {...});
//
// Thread-safe. Callbacks run on gRPC threads; the inspector must outlive
// every call it started (the Local server's shutdown waits for the calls
// that started them).
#ifndef RDMAD_DAEMON_SERVICE_PEER_INSPECTOR_H_
#define RDMAD_DAEMON_SERVICE_PEER_INSPECTOR_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/security/credentials.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::service {

// The questions the Local service forwards to other daemons' Peer
// services. PeerInspector asks them over gRPC; unit tests answer in its
// place. Thread-safe in every implementation.
class PeerInspection {
 public:
  virtual ~PeerInspection() = default;

  // A page of the exports of the daemon at `peer` ("HOST:PORT"). `done`
  // runs exactly once, with UNAVAILABLE naming the peer if it cannot be
  // reached.
  virtual void ListExports(
      const std::string& peer, const v1::ListExportsRequest& request,
      absl::Time deadline,
      std::function<void(absl::StatusOr<v1::ListExportsResponse>)> done) = 0;

  // The exported region `name` of the daemon at `peer`; `done` as above.
  virtual void Resolve(
      const std::string& peer, const v1::ResolveRequest& request,
      absl::Time deadline,
      std::function<void(absl::StatusOr<v1::ResolveResponse>)> done) = 0;
};

class PeerInspector final : public PeerInspection {
 public:
  // `credentials`: for channels to peers (null: insecure), as the peer
  // table uses them.
  explicit PeerInspector(std::shared_ptr<grpc::ChannelCredentials> credentials);

  // PeerInspection.
  void ListExports(const std::string& peer,
                   const v1::ListExportsRequest& request, absl::Time deadline,
                   std::function<void(absl::StatusOr<v1::ListExportsResponse>)>
                       done) override;
  void Resolve(
      const std::string& peer, const v1::ResolveRequest& request,
      absl::Time deadline,
      std::function<void(absl::StatusOr<v1::ResolveResponse>)> done) override;

 private:
  std::shared_ptr<v1::Peer::Stub> StubFor(const std::string& peer)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<v1::Peer::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

// Text another daemon sent, made safe to show: printable ASCII (anything
// else becomes '?'), at most 1 KiB. Peers are not trusted.
std::string PrintableFromPeer(absl::string_view text);

// A failed call to a peer, with what to do: the peer's own status for
// answers it gave (NOT_FOUND, PERMISSION_DENIED...), UNAVAILABLE naming
// `peer` when it could not be reached, UNIMPLEMENTED when it is too old.
absl::Status PeerCallStatus(const std::string& peer,
                            const grpc::Status& status);

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_PEER_INSPECTOR_H_
