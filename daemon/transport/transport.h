// The data transport interface: what the peer layer (daemon/peer) needs from
// a transport to move bytes between a local region and a region that another
// daemon exports, and what it shows in ListPeers/ListQps.
//
// Two transports implement it: TCP (daemon/transport/tcp) and verbs
// (daemon/transport/verbs, RC QPs). Per peer the peer layer
//   1. picks a transport from what both daemons advertise in Peer.Hello,
//   2. asks that transport's Connector to fill its part of a Peer.Connect
//      request, sends it, and hands the response back to get a DataChannel,
//   3. posts validated RemoteOps on the channel.
// On the serving side Peer.Connect is answered by the transport's
// ConnectAcceptor.
//
// The peer layer has already checked everything it can see before it posts
// (local range, remote range against the resolved region length, access);
// the remote side still enforces key, bounds and access itself, exactly as a
// NIC does for an rkey, so a stale or forged descriptor cannot touch memory.
//
// Example (peer layer):
//   transport::RemoteOp op;
//   op.op = core::OpType::kWrite;
//   op.local = region;                       // keeps the memory mapped
//   op.local_addr = region->data() + 4096;
//   op.length = n;
//   op.remote = target;                      // from Peer.Resolve
//   op.deadline = absl::Now() + absl::Seconds(5);
//   channel->Post(std::move(op), [](absl::Status s) { ... });
#ifndef RDMAD_DAEMON_TRANSPORT_TRANSPORT_H_
#define RDMAD_DAEMON_TRANSPORT_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/core/region.h"
#include "daemon/core/transfer_engine.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::transport {

// Where an operation lands on the peer: one exported region, as resolved
// through Peer.Resolve or an encoded descriptor.
struct RemoteTarget {
  uint64_t region_id = 0;
  std::string region_name;  // for messages only
  uint64_t region_length = 0;
  // verbs: the remote virtual address of the region's first byte and the
  // rkey of the export registration on each remote device.
  uint64_t addr = 0;
  std::vector<core::DeviceRegistration> rkeys;
  // tcp: the 64-bit key of the current export.
  uint64_t tcp_key = 0;
  // Byte offset of this operation inside the remote region.
  uint64_t offset = 0;
};

// One validated one-sided operation.
struct RemoteOp {
  core::OpType op = core::OpType::kWrite;  // WRITE: local -> remote
  // The local region; the channel keeps this reference until the callback
  // has run, so a concurrent FreeRegion cannot unmap memory under the I/O.
  std::shared_ptr<core::Region> local;
  char* local_addr = nullptr;  // inside `local`: source (WRITE) or sink (READ)
  uint64_t length = 0;         // > 0
  RemoteTarget remote;
  // The operation fails with DEADLINE_EXCEEDED if not complete by then.
  absl::Time deadline = absl::InfiniteFuture();
};

// Runs exactly once per posted operation, from any thread (usually the
// transport's I/O thread, or inside Post for an immediate failure). It must
// not block and must not destroy or Close() the channel it came from.
// After it ran, the transport never writes into the local memory of the
// operation again.
using OpCallback = absl::AnyInvocable<void(absl::Status)>;

// One connection (TCP) or queue pair (verbs) of a channel, for ListQps.
struct ConnectionInfo {
  uint32_t index = 0;        // position in the channel (TCP: connection #)
  std::string device;        // local verbs device; "" for TCP
  uint32_t local_qpn = 0;    // verbs QPN; TCP: the connection index
  uint32_t remote_qpn = 0;   // verbs: the peer's QPN
  std::string state;         // verbs: "RTS", "ERR"...; TCP: "IDLE",
                             // "CONNECTING", "READY", "ERROR"
  uint32_t path_mtu = 0;     // verbs only
  uint64_t posted = 0;       // requests (TCP frames / work requests) posted
  uint64_t post_calls = 0;   // verbs: ibv_post_send calls (one per chain)
  uint64_t completed = 0;    // completed successfully
  uint64_t errors = 0;       // failed (error status, lost connection...)
  uint32_t outstanding = 0;  // in flight now
  uint64_t generation = 0;   // TCP: times (re)connected; verbs: handshake
  std::string local_address;   // TCP: local HOST:PORT of the socket
  std::string remote_address;  // TCP: peer HOST:PORT of the socket
};

// A data channel as a whole, for ListPeers/ListQps.
struct ChannelInfo {
  v1::TransportKind kind = v1::TRANSPORT_UNSPECIFIED;
  std::string state;       // "READY", "DEGRADED", "ERROR", "CLOSED"
  std::string last_error;  // last connection-level error, if any
  std::vector<ConnectionInfo> connections;
};

// The per-peer data path. Thread-safe: Post and Describe may be called from
// any thread, concurrently. Owned by a shared_ptr (the peer layer's), which
// lets a channel join a PostBatch (post_batch.h).
class DataChannel : public std::enable_shared_from_this<DataChannel> {
 public:
  // Destroying the channel closes it (see Close).
  virtual ~DataChannel() = default;

  virtual v1::TransportKind kind() const = 0;

  // Starts `op`. `done` runs exactly once with OK, or with the status of the
  // first failure: the remote side's (NOT_FOUND, PERMISSION_DENIED,
  // OUT_OF_RANGE, ...), DEADLINE_EXCEEDED at op.deadline, or UNAVAILABLE
  // when the connection to the peer failed. Never blocks.
  virtual void Post(RemoteOp op, OpCallback done) = 0;

  virtual ChannelInfo Describe() const = 0;

  // True once the channel cannot carry new operations until the peer layer
  // makes a new one with Peer.Connect (verbs: a QP went to the error state;
  // an RC QP cannot be reconnected without the peer). A TCP channel
  // reconnects by itself and never needs this.
  virtual bool NeedsReconnect() const { return false; }

  // Fails everything in flight with UNAVAILABLE, stops the channel's
  // threads and waits for them. Later Posts fail at once. Idempotent. Must
  // not be called from an OpCallback.
  virtual void Close() = 0;
};

// The connecting side of one transport kind: builds DataChannels to peers.
class Connector {
 public:
  // The half-made channel between sending Peer.Connect and its answer
  // (verbs: QPs created, waiting for the peer's QP numbers).
  class Pending {
   public:
    virtual ~Pending() = default;
    // Completes the channel with the peer's answer.
    virtual absl::StatusOr<std::unique_ptr<DataChannel>> Finish(
        const v1::ConnectResponse& response) = 0;
  };

  virtual ~Connector() = default;

  virtual v1::TransportKind kind() const = 0;

  // Whether this side can use the transport at all (verbs: a device with an
  // active port). `why` says why not.
  virtual bool Usable(std::string* why) const = 0;

  // Fills this transport's fields of `request` (kind, connection count,
  // verbs QP endpoints...) for `peer` ("HOST:PORT" of its Peer service).
  virtual absl::StatusOr<std::unique_ptr<Pending>> Prepare(
      const std::string& peer, v1::ConnectRequest* request) = 0;
};

// The serving side of Peer.Connect for one transport kind. Thread-safe.
class ConnectAcceptor {
 public:
  virtual ~ConnectAcceptor() = default;
  virtual v1::TransportKind kind() const = 0;
  // Answers a Connect request of this kind (TCP: where the data listener
  // is; verbs: creates and connects QPs for the caller).
  virtual absl::Status Accept(const v1::ConnectRequest& request,
                              v1::ConnectResponse* response) = 0;
};

}  // namespace rdmad::transport

#endif  // RDMAD_DAEMON_TRANSPORT_TRANSPORT_H_
