// PeerQueries: what is asked of the peer table from outside the data path:
// the peers and their connections as they are now (ListPeers, ListQps,
// GetStatus), and a remote region resolved as a transfer would resolve it
// (Local.OpenRemote). PeerTable implements it; the Local service takes it,
// so that its unit tests can answer in its place. None of these calls is on
// the data path.
#ifndef RDMAD_DAEMON_PEER_PEER_QUERIES_H_
#define RDMAD_DAEMON_PEER_PEER_QUERIES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/core/transfer.h"
#include "daemon/core/transport_kind.h"
#include "daemon/peer/peer_connection.h"
#include "daemon/peer/peer_connector.h"
#include "daemon/peer/transfer_flow.h"
#include "daemon/transport/transport.h"

namespace rdmad::peer {

// One peer, for ListPeers.
struct PeerSnapshot {
  std::string address;
  uint64_t incarnation = 0;
  core::TransportKind transport = core::TransportKind::kNone;
  std::string transport_reason;
  PeerState state = PeerState::kNew;
  // When READY: the channel's own view (DEGRADED while some of its
  // connections are down).
  transport::ChannelState channel_state = transport::ChannelState::kReady;
  std::string last_error;
  uint64_t bytes_written = 0;
  uint64_t bytes_read = 0;
  uint64_t ops_completed = 0;
  uint64_t ops_failed = 0;
  std::vector<transport::RailInfo> rails;  // the channel's (verbs)
};

// One connection or QP, for ListQps.
struct ConnectionSnapshot {
  std::string peer;
  core::TransportKind transport = core::TransportKind::kNone;
  transport::ConnectionInfo connection;
};

// Thread-safe in every implementation.
class PeerQueries {
 public:
  virtual ~PeerQueries() = default;

  // The region `target` names on a peer, as TransferFlow::Resolve: `done`
  // runs exactly once, from any thread.
  virtual void Resolve(const core::TransferTarget& target, uint32_t uid,
                       absl::Time deadline,
                       Callback<TransferFlow::Resolved> done) = 0;
  // Every peer known now, and every connection or QP to them.
  virtual std::vector<PeerSnapshot> ListPeers() const = 0;
  virtual std::vector<ConnectionSnapshot> ListConnections() const = 0;
  // How many peers are known.
  virtual size_t size() const = 0;
};

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_PEER_QUERIES_H_
