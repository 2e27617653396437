// The data transport interface: what the peer layer (daemon/peer) needs from
// a transport to move bytes between a local region and a region that another
// daemon exports, and what it shows in ListPeers/ListQps.
//
// Two transports implement it: TCP (daemon/transport/tcp) and verbs
// (daemon/transport/verbs, RC QPs). Per peer the peer layer
//   1. picks a transport from what both daemons advertise in Peer.Hello
//      (transport_choice.h),
//   2. asks that transport's Connector to fill its part of a Peer.Connect
//      request, sends it, and hands the response back to get a DataChannel,
//   3. takes, once per resolved region, the key this transport needs
//      (KeyFor), and posts batches of RemoteOps on the channel.
// On the serving side Peer.Connect is answered by the transport's
// ConnectAcceptor.
//
// What the channel is given has been checked (local range, remote range
// against the region's length, access); the remote side still enforces key,
// bounds and access itself, exactly as a NIC does for an rkey, so a stale
// or forged key cannot touch memory.
//
// Example (peer layer):
//   RDMAD_ASSIGN_OR_RETURN(transport::RemoteKey key, channel->KeyFor(*info));
//   transport::RemoteOp ops[2];
//   ops[0].op = core::OpType::kWrite;
//   ops[0].local = region;                   // keeps the memory mapped
//   ops[0].local_addr = region->data() + 4096;
//   ops[0].length = n;
//   ops[0].remote = info;                    // from Peer.Resolve
//   ops[0].key = key;
//   ops[0].deadline = absl::Now() + absl::Seconds(5);
//   ops[0].done = [](absl::Status s) { ... };
//   ...
//   channel->Post(absl::MakeSpan(ops));      // one doorbell / one sendmsg
#ifndef RDMAD_DAEMON_TRANSPORT_TRANSPORT_H_
#define RDMAD_DAEMON_TRANSPORT_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "daemon/core/region.h"
#include "daemon/core/transfer.h"
#include "daemon/core/transport_kind.h"
#include "daemon/transport/rail_counters.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::transport {

// Where one transport addresses a remote region, taken from its
// RemoteRegionInfo by DataChannel::KeyFor.
struct RemoteKey {
  uint64_t base = 0;  // verbs: remote address of the first byte; tcp: region id
  uint64_t key = 0;   // verbs: the rkey on the peer's device; tcp: the TCP key
};

// Runs exactly once per posted operation, on the channel's event loop (or
// inside Post for an immediate failure). It must not block. After it ran,
// the transport never writes into the local memory of the operation again.
using OpCallback = absl::AnyInvocable<void(absl::Status)>;

// One checked one-sided operation.
struct RemoteOp {
  core::OpType op = core::OpType::kWrite;  // WRITE: local -> remote
  // The local region; the channel keeps this reference until `done` has
  // run, so a concurrent FreeRegion cannot unmap memory under the I/O.
  std::shared_ptr<core::Region> local;
  char* local_addr = nullptr;  // inside `local`: source (WRITE) or sink (READ)
  uint64_t length = 0;         // > 0
  // The region on the peer (for messages), the key into it, and the offset
  // of this operation inside it.
  std::shared_ptr<const core::RemoteRegionInfo> remote;
  RemoteKey key;
  uint64_t remote_offset = 0;
  // The operation fails with DEADLINE_EXCEEDED if not complete by then.
  absl::Time deadline = absl::InfiniteFuture();
  // WRITE only: the owner of the remote region is told when the data is
  // in place (RDMA WRITE with immediate).
  std::optional<uint32_t> immediate;
  // With an immediate: the notification also covers this many bytes before
  // remote_offset, which the caller made sure were in place before it
  // posted this op (the other pieces of a WRITE striped over several
  // rails): the owner is told of [remote_offset - notify_before,
  // remote_offset + length).
  uint64_t notify_before = 0;
  OpCallback done;
};

enum class ConnectionState : uint8_t { kIdle, kConnecting, kReady, kError, kClosed };
enum class ChannelState : uint8_t { kReady, kDegraded, kError, kClosed };

// A rail as ListPeers and the metrics show it: its scheduler's state
// (verbs/rail_scheduler.h), or kRebuilding when the scheduler has it
// active but its QPs failed, and new ones come with the next Peer.Connect.
enum class RailStatus : uint8_t { kActive, kProbing, kPaused, kRebuilding };

// "IDLE", "CONNECTING", "READY", "ERROR", "CLOSED".
absl::string_view ConnectionStateName(ConnectionState state);
// "READY", "DEGRADED", "ERROR", "CLOSED".
absl::string_view ChannelStateName(ChannelState state);
// "ACTIVE", "PROBING", "PAUSED", "REBUILDING": the words of ListPeers
// (RailInfo.state) and of the rdmad_rails metric.
absl::string_view RailStatusName(RailStatus status);

// One connection (TCP) or queue pair (verbs) of a channel, for ListQps.
struct ConnectionInfo {
  uint32_t index = 0;        // position in the channel
  ConnectionState state = ConnectionState::kIdle;
  std::string device;        // verbs: local device; "" for TCP
  std::string qp_state;      // verbs: the ibv_qp_state ("RTS", "ERR"...)
  uint32_t local_qpn = 0;    // verbs QPN; 0 for TCP
  uint32_t remote_qpn = 0;   // verbs: the peer's QPN
  uint32_t path_mtu = 0;     // verbs only
  uint64_t posted = 0;       // requests (TCP frames / work requests) posted
  uint64_t post_calls = 0;   // ibv_post_send / sendmsg calls that posted them
  uint64_t completed = 0;    // completed successfully
  uint64_t errors = 0;       // failed (error status, lost connection...)
  uint32_t outstanding = 0;  // in flight now
  uint64_t generation = 0;   // TCP: times (re)connected; verbs: handshake
  uint32_t rail = 0;         // verbs: the rail (RailInfo::index) it is on
  std::string local_address;   // TCP: local HOST:PORT of the socket
  std::string remote_address;  // TCP: peer HOST:PORT of the socket
};

// One rail of a verbs channel (a local RDMA port paired with one of the
// peer's), for ListPeers and the metrics: where it goes, and its counters.
struct RailInfo : RailCounters {
  uint32_t index = 0;
  std::string device;         // local device
  uint32_t port = 0;
  std::string remote_device;  // the peer's
  RailStatus state = RailStatus::kActive;
  int numa_node = -1;         // of the device; -1 unknown
};

// A data channel as a whole, for ListPeers/ListQps.
struct ChannelInfo {
  core::TransportKind kind = core::TransportKind::kNone;
  ChannelState state = ChannelState::kReady;
  std::string last_error;  // last connection-level error, if any
  std::vector<ConnectionInfo> connections;
  std::vector<RailInfo> rails;  // verbs; empty on TCP (one connection set)
};

// The per-peer data path. Each channel lives on one event loop of the
// daemon's IoRuntime; Post, KeyFor, Describe and Close may be called from
// any thread, concurrently.
class DataChannel {
 public:
  // Destroying the channel closes it (see Close).
  virtual ~DataChannel() = default;

  virtual core::TransportKind kind() const = 0;

  // The key this transport uses for `region`. FAILED_PRECONDITION, saying
  // what to do, when the region carries none for it (verbs: no rkey for
  // the device this channel's QPs reach).
  virtual absl::StatusOr<RemoteKey> KeyFor(
      const core::RemoteRegionInfo& region) const = 0;

  // Starts every operation of `ops` (moved from), as one batch: verbs posts
  // one ibv_post_send chain per QP, TCP coalesces the frames into as few
  // sendmsg calls as it can. Each op's `done` runs exactly once with OK, or
  // with the status of its first failure: the remote side's (NOT_FOUND,
  // PERMISSION_DENIED, OUT_OF_RANGE...), DEADLINE_EXCEEDED at its deadline,
  // or UNAVAILABLE when the connection to the peer failed. Never blocks.
  virtual void Post(absl::Span<RemoteOp> ops) = 0;

  virtual ChannelInfo Describe() const = 0;

  // True once the channel cannot carry new operations until the peer layer
  // makes a new one with Peer.Connect (verbs: a QP went to the error state;
  // an RC QP cannot be reconnected without the peer). A TCP channel
  // reconnects by itself and never needs this.
  virtual bool NeedsReconnect() const { return false; }

  // Fails everything in flight with UNAVAILABLE (on the channel's loop,
  // soon after) and refuses later Posts. Idempotent; callable from any
  // thread, including from an OpCallback.
  virtual void Close() = 0;
};

// Sends a Peer.Connect that the transport built itself, after the data
// channel exists (verbs: QPs added to a pool that grew), to the peer at
// `peer` and calls `done` once with its answer, from any thread. The sender
// fills in this daemon's incarnation and address; the answer's incarnation
// and generation are for the transport to check. Copyable; thread-safe.
using ConnectDone = absl::AnyInvocable<void(absl::StatusOr<v1::ConnectResponse>)>;
using ConnectSender = std::function<void(
    const std::string& peer, v1::ConnectRequest request, ConnectDone done)>;

// The connecting side of one transport kind: builds DataChannels to peers.
class Connector {
 public:
  // The half-made channel between sending Peer.Connect and its answer
  // (verbs: QPs created, waiting for the peer's QP numbers).
  class Pending {
   public:
    virtual ~Pending() = default;
    // Completes the channel with the peer's answer.
    virtual absl::StatusOr<std::shared_ptr<DataChannel>> Finish(
        const v1::ConnectResponse& response) = 0;
  };

  virtual ~Connector() = default;

  virtual core::TransportKind kind() const = 0;

  // Whether this side can use the transport at all (verbs: a device with an
  // active port). `why` says why not.
  virtual bool Usable(std::string* why) const = 0;

  // Fills this transport's fields of `request` (kind, connection count,
  // verbs QP endpoints...) for `peer` ("HOST:PORT" of its Peer service).
  // `request` already names this daemon (address).
  virtual absl::StatusOr<std::unique_ptr<Pending>> Prepare(
      const std::string& peer, v1::ConnectRequest* request) = 0;

  // How channels made later may send their own Peer.Connects (see
  // ConnectSender); given once, before the first Prepare. A transport
  // that sends none ignores it.
  virtual void UseSender(ConnectSender sender) { (void)sender; }
};

// The serving side of Peer.Connect for one transport kind. Thread-safe.
class ConnectAcceptor {
 public:
  virtual ~ConnectAcceptor() = default;
  virtual core::TransportKind kind() const = 0;
  // Answers a Connect request of this kind (TCP: where the data listener
  // is; verbs: creates and connects QPs for the caller). `caller` is the IP
  // address the call came from, as this daemon saw it (empty if unknown):
  // verbs holds the notices on the QPs it makes to the exports' access
  // lists by it; a TCP data connection has its own address.
  virtual absl::Status Accept(const v1::ConnectRequest& request,
                              const std::string& caller,
                              v1::ConnectResponse* response) = 0;
  // The connections serving peers (verbs: the responder QPs), for ListQps;
  // `peer` is the caller's address. Empty where there is nothing to show.
  struct Served {
    std::string peer;
    ConnectionInfo connection;
  };
  virtual std::vector<Served> ListServed() const { return {}; }
  // The shared receive queue of a device, for ListDevices.
  struct NoticeQueue {
    std::string device;
    uint32_t depth = 0;
    uint64_t posted = 0;
    uint64_t reposts = 0;
  };
  // One per device that has one (verbs only).
  virtual std::vector<NoticeQueue> NoticeQueues() const { return {}; }
};

}  // namespace rdmad::transport

#endif  // RDMAD_DAEMON_TRANSPORT_TRANSPORT_H_
