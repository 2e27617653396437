// PeerTable: the remote daemons this daemon talks to, and the data path to
// them. Implements core::RemoteTransfers for the TransferEngine.
//
// Per peer address it keeps a gRPC stub to the peer's Peer service and, once
// used:
//   1. Hello: learns the peer's incarnation and the transports it offers;
//   2. picks the transport (verbs when both sides can use it, else TCP;
//      --transport forces one) and runs Peer.Connect through that
//      transport's Connector to get a DataChannel;
//   3. resolves region names with Peer.Resolve, caching by (peer, name), or
//      decodes an out-of-band descriptor;
//   4. checks the remote range against the resolved length (OUT_OF_RANGE)
//      and the access (PERMISSION_DENIED) before anything is sent, then
//      posts the operation on the channel.
// A new incarnation (the peer restarted) rebuilds the channel and drops the
// cached names; a NOT_FOUND/PERMISSION_DENIED from the data path drops the
// cached name (a stale key); a lost connection makes the next use say Hello
// again. A transfer that failed UNAVAILABLE, or failed on a cached name that
// turned out stale, is retried once (one-sided WRITE/READ are idempotent)
// within its deadline. A dead peer fails transfers with UNAVAILABLE naming
// it; a slow one with DEADLINE_EXCEEDED at the transfer's deadline.
//
// Threads: Submit never blocks; the work continues in gRPC callbacks and the
// transports' I/O threads. One housekeeping thread fails waiters whose
// deadline passed and closes retired channels. Thread-safe.
//
// Example:
//   PeerTableOptions options;
//   options.incarnation = id.incarnation;
//   std::vector<std::unique_ptr<transport::Connector>> connectors;
//   connectors.push_back(std::make_unique<tcp::TcpConnector>(tcp_options));
//   PeerTable peers(options, std::move(connectors));
//   peers.SetSelfAddress("10.0.0.1:7471");
//   core::TransferEngine engine(&regions, &peers);
#ifndef RDMAD_DAEMON_PEER_PEER_TABLE_H_
#define RDMAD_DAEMON_PEER_PEER_TABLE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/transport/transport.h"
#include "rdmad/v1/rdmad.pb.h"

namespace grpc {
class ChannelCredentials;
class ClientContext;
}  // namespace grpc

namespace rdmad::peer {

struct PeerTableOptions {
  std::string version;
  uint64_t incarnation = 0;  // this daemon's
  // "auto" (verbs where both sides can, else tcp), "tcp" or "verbs".
  std::string transport = "auto";
  // Transports this daemon offers in Hello, best first.
  std::vector<v1::TransportKind> offered = {v1::TRANSPORT_TCP};
  // This daemon's RDMA ports, sent in Hello (verbs).
  std::vector<v1::FabricEndpoint> endpoints;
  // Deadline of each Hello/Connect/Resolve call. Transfers waiting on one
  // still fail at their own deadlines; this only bounds the call. Generous,
  // because a first connection can be slow on a loaded node (seen: over 5 s
  // in the emulated lab VM while the host was busy), and a call that times
  // out is work thrown away.
  absl::Duration rpc_timeout = absl::Seconds(20);
  // Credentials for channels to peers' Peer services: null = insecure;
  // grpc::SslCredentials with this daemon's certificate for mutual TLS.
  std::shared_ptr<grpc::ChannelCredentials> channel_credentials;
};

// One peer, for ListPeers.
struct PeerSnapshot {
  std::string address;
  uint64_t incarnation = 0;
  v1::TransportKind transport = v1::TRANSPORT_UNSPECIFIED;
  std::string transport_reason;
  std::string state;  // "NEW", "CONNECTING", "READY", "DEGRADED", "ERROR"
  std::string last_error;
  uint64_t bytes_written = 0;
  uint64_t bytes_read = 0;
  uint64_t ops_completed = 0;
  uint64_t ops_failed = 0;
};

// One connection or QP, for ListQps.
struct ConnectionSnapshot {
  std::string peer;
  transport::ConnectionInfo connection;
};

class PeerTable final : public core::RemoteTransfers {
 public:
  // `connectors`: one per transport kind this daemon can connect with.
  PeerTable(PeerTableOptions options,
            std::vector<std::unique_ptr<transport::Connector>> connectors);
  ~PeerTable() override;  // Shutdown()

  PeerTable(const PeerTable&) = delete;
  PeerTable& operator=(const PeerTable&) = delete;

  // This daemon's own Peer address, sent in Hello/Connect. Known only once
  // the Peer server is bound, so set after construction.
  void SetSelfAddress(std::string address);

  // core::RemoteTransfers.
  void Submit(const core::TransferRequest& request,
              std::shared_ptr<core::Region> local,
              core::TransferDone done) override;

  std::vector<PeerSnapshot> ListPeers() const;
  std::vector<ConnectionSnapshot> ListConnections() const;
  size_t size() const;

  // Begins shutting down: new transfers fail at once with UNAVAILABLE, and
  // transfers still running at `deadline` are failed then. Lets the gRPC
  // servers' graceful shutdown finish even when a transfer would hang.
  void Drain(absl::Time deadline);

  // Fails everything still waiting with UNAVAILABLE, cancels outstanding
  // gRPC calls, closes every channel and stops the housekeeping thread.
  // Idempotent; blocks until all of it is done.
  void Shutdown();

 private:
  struct Peer;
  struct Transfer;
  struct Resolved;

  std::shared_ptr<Peer> GetPeer(const std::string& address);
  void Begin(std::shared_ptr<Transfer> t);
  void EnsureReady(const std::shared_ptr<Peer>& peer, absl::Time deadline,
                   absl::AnyInvocable<void(absl::Status)> ready);
  void StartHandshake(std::shared_ptr<Peer> peer);
  void OnHello(std::shared_ptr<Peer> peer, const v1::HelloResponse& response);
  void StartConnect(std::shared_ptr<Peer> peer, uint64_t incarnation);
  void HandshakeDone(const std::shared_ptr<Peer>& peer, absl::Status status);
  void ResolveTarget(std::shared_ptr<Transfer> t);
  void LookupName(const std::shared_ptr<Peer>& peer, const std::string& name,
                  std::optional<uint32_t> uid, absl::Time deadline,
                  absl::AnyInvocable<void(absl::StatusOr<Resolved>)> done);
  void OnResolved(const std::shared_ptr<Peer>& peer, const std::string& name,
                  absl::StatusOr<Resolved> result);
  void Send(std::shared_ptr<Transfer> t, Resolved target);
  void OnSent(std::shared_ptr<Transfer> t, absl::Status status);
  void Finish(const std::shared_ptr<Transfer>& t, absl::Status status);
  // A step failed: retries once where that can help, else finishes.
  void Failed(std::shared_ptr<Transfer> t, absl::Status status);
  void MarkStale(const std::shared_ptr<Peer>& peer, const absl::Status& why);
  void Retire(std::shared_ptr<transport::DataChannel> channel);
  void HousekeepingLoop();
  // Fails waiters whose deadline passed (all of them if `all`) with
  // `status`, or DEADLINE_EXCEEDED if it is OK. True if any still wait.
  bool FailExpired(absl::Time now, bool all, const absl::Status& status);
  transport::Connector* FindConnector(v1::TransportKind kind) const;

  // Tracks an outstanding gRPC call (its context, kept alive by `owner`)
  // so Shutdown can cancel it and wait for its callback. False when
  // shutting down: then the call must not be started.
  bool TrackCall(grpc::ClientContext* context, std::shared_ptr<void> owner);
  void UntrackCall(grpc::ClientContext* context);

  const PeerTableOptions options_;
  const std::vector<std::unique_ptr<transport::Connector>> connectors_;

  mutable absl::Mutex mu_;
  std::string self_address_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<Peer>> peers_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<grpc::ClientContext*, std::shared_ptr<void>> calls_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<transport::DataChannel>> retired_
      ABSL_GUARDED_BY(mu_);
  absl::Time drain_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar cv_;  // wakes the housekeeping thread; signals calls_ empty
  std::thread housekeeping_;
};

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_PEER_TABLE_H_
