// RailChannel: the verbs data channel to one peer over every rail
// (transport::DataChannel).
//
// A rail is a local RDMA port paired with one of the peer's in Peer.Connect;
// each has its own pool of RC QPs and CQ, a VerbsChannel (the channel of
// one rail; any DataChannel in tests). RailChannel spreads operations over
// them with a RailScheduler (rail_scheduler.h):
//   - an operation up to the stripe threshold goes whole to the rail with
//     the fewest outstanding bytes;
//   - a larger one is split into pieces (page-aligned, at least 64 KiB),
//     weighted by each rail's measured bandwidth; it completes when every
//     piece did.
// The rails an operation may use: those that hold a key for its region
// (the peer registered it on their devices), whose QPs are sound and whose
// port is ACTIVE; of them the pinned ones (config rail_pins) for a region
// whose name matches, else those on the NUMA node of the operation's memory
// where the devices' nodes are known and differ, else all; and all of them
// when none of the preferred ones can take it.
//
// A WRITE with an immediate split over rails tells its receiver only once
// every byte is in place: its last piece is held back until every other
// piece completed (an RDMA WRITE completes once the responder placed it),
// then posted with the immediate and a notice covering the whole range
// (RemoteOp::notify_before).
//
// Rail failure: a piece that fails on a rail whose QPs failed, for the
// transport's sake (retries exhausted, the link down, flushed: not the
// operation's own access, range or deadline), or whose port went down
// (PortMonitor calls OnPortChange, and the rail's channel is closed at once
// so its pieces come back) pauses that rail
// (RailScheduler::Pause) and is posted again on another rail: while one
// rail lives, no operation fails because another died. A rail whose QPs
// failed needs new ones from the peer: NeedsReconnect() asks the peer layer
// for a new Peer.Connect once its pause is over and its port is ACTIVE, at
// a moment the channel is idle (or after waiting pause_min for one), so
// that the rebuild disturbs no operation in flight; the new channel shares
// this one's PeerRails, and the rail returns there through one probe.
// Without any rail left that works, NeedsReconnect() is true at once (as
// for a one-rail channel). A failure the rail is not to blame for (a
// deadline, a remote access error) fails the operation; the rail's QPs
// are rebuilt the same way, without a pause. A rail that could not be set
// up at all (RailLink::setup_error) starts paused and is rebuilt the same
// way.
//
// Every rail change is logged once. Thread-safe: Post, Describe, KeyFor,
// NeedsReconnect, Close and OnPortChange from any thread; the pieces'
// callbacks run on the rails' loops. No lock is held while calling a rail
// or a caller's callback.
//
// Example (VerbsConnector, once the peer answered Connect):
//   RailChannelOptions options;
//   options.peer = "10.0.0.2:7471";
//   options.rails = registry.For(options.peer, rail_count);
//   auto channel = RailChannel::Create(std::move(options), std::move(links));
//   monitor->Subscribe(channel);
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_RAIL_CHANNEL_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_RAIL_CHANNEL_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/port_monitor.h"
#include "daemon/transport/verbs/rail_scheduler.h"

namespace rdmad::verbs {

// What this daemon knows of its rails to one peer, across the channels the
// peer layer builds to it: the scheduler (pauses, bandwidths, counters)
// under its lock.
struct PeerRails {
  PeerRails(RailSchedulerOptions options, size_t rails)
      : count(rails), scheduler(std::move(options), rails) {}
  const size_t count;  // rails of the scheduler
  absl::Mutex mu;
  RailScheduler scheduler ABSL_GUARDED_BY(mu);
  uint64_t used = 0;  // PeerRailsRegistry's, under its lock
};

// The PeerRails of every peer, kept while channels come and go. Bounded:
// past `max_peers` the one used longest ago is forgotten. Thread-safe.
class PeerRailsRegistry {
 public:
  PeerRailsRegistry(RailSchedulerOptions options, size_t max_peers)
      : options_(std::move(options)), max_peers_(max_peers) {}
  // The rails of `peer`, made for `rails` rails the first time.
  std::shared_ptr<PeerRails> For(const std::string& peer, size_t rails);

 private:
  const RailSchedulerOptions options_;
  const size_t max_peers_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<PeerRails>> peers_
      ABSL_GUARDED_BY(mu_);
  uint64_t uses_ ABSL_GUARDED_BY(mu_) = 0;
};

// One rail of a channel.
struct RailLink {
  // The rail's own channel (a VerbsChannel); null when the peer paired
  // none with it (an rdmad without rails answers for the first only).
  std::shared_ptr<transport::DataChannel> channel;
  std::string device;         // local RDMA device: the lkey, the pins
  uint32_t port = 1;
  std::string remote_device;  // the peer's: the rkey
  int numa_node = -1;         // of the local device; -1 unknown
  // Without a channel: why this side or the peer could not set the rail
  // up (a port down); the rail is then paused and rebuilt after its pause.
  // Empty: the peer pairs no rail with it (nothing to rebuild).
  std::string setup_error;
};

// Operations on regions whose name starts with `region_prefix` use `rails`.
struct RailPinSet {
  std::string region_prefix;
  RailSet rails = 0;
};

struct RailChannelOptions {
  std::string peer;  // the peer's Peer address, for messages
  // Shared with the peer's other channels (PeerRailsRegistry). Its
  // scheduler has at least as many rails as the channel.
  std::shared_ptr<PeerRails> rails;
  std::vector<RailPinSet> pins;
  // Clock (tests give a fake one).
  std::function<absl::Time()> now = [] { return absl::Now(); };
  // The NUMA node of the memory at an address, -1 unknown. Default:
  // get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR). Asked only where the rails'
  // devices are on different known nodes.
  std::function<int(const void*)> memory_node;
  // Whether rail i's port is ACTIVE when the channel starts. Default: yes.
  std::function<bool(size_t)> port_active;
};

class RailChannel final : public transport::DataChannel,
                          public PortListener,
                          public std::enable_shared_from_this<RailChannel> {
 public:
  // `links` has at least one rail with a channel, at most kMaxRails.
  static std::shared_ptr<RailChannel> Create(RailChannelOptions options,
                                             std::vector<RailLink> links);
  ~RailChannel() override;  // closes every rail

  core::TransportKind kind() const override {
    return core::TransportKind::kVerbs;
  }
  // The key on the first rail whose peer device holds one for `region`.
  absl::StatusOr<transport::RemoteKey> KeyFor(
      const core::RemoteRegionInfo& region) const override;
  void Post(absl::Span<transport::RemoteOp> ops) override;
  transport::ChannelInfo Describe() const override;
  bool NeedsReconnect() const override;
  void Close() override;

  // PortListener: a rail's port went down (the rail is paused and its
  // channel closed: its pieces go to the other rails) or came back.
  void OnPortChange(const std::string& device, uint32_t port,
                    bool active) override;

 private:
  // One operation as the caller posted it, and what is left of it.
  struct Op {
    transport::RemoteOp op;  // `done` runs once, when nothing is left
    RailSet keyed = 0;       // rails holding a key for its region
    size_t pieces_left = 0;  // posted, not yet completed
    absl::Status status;     // first failure
    // A WRITE with an immediate split over rails: its last piece, posted
    // with the immediate once every other piece completed.
    std::optional<RailSlice> held;
  };
  using OpPtr = std::shared_ptr<Op>;
  // A piece to post on a rail.
  struct Piece {
    OpPtr op;
    RailSlice slice;
    bool immediate = false;  // carries the op's immediate (its last piece)
  };

  RailChannel(RailChannelOptions options, std::vector<RailLink> links);

  // The key of `region` on rail `rail`'s peer device.
  std::optional<transport::RemoteKey> KeyOn(
      size_t rail, const core::RemoteRegionInfo* region,
      const transport::RemoteKey& fallback) const;
  // The rails that can carry `op`: the peer's device has a key for the
  // remote region, and this side's device registered the local memory.
  RailSet Keyed(const transport::RemoteOp& op) const;
  // Pins, else the NUMA-near rails, else all.
  RailSet Preferred(const transport::RemoteOp& op) const;
  // Rails with a channel, sound QPs and an ACTIVE port.
  RailSet Healthy() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(rails_->mu);
  // PAUSED rails whose pause is over and whose QPs are sound come back;
  // with no other rail, sound PAUSED ones come back at once.
  void ResumeDue(RailSet usable, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(rails_->mu);
  // Plans `op` (slices, Posted) under the lock; false with `why` when no
  // rail can take it.
  bool Plan(Op& op, absl::Time now, std::vector<RailSlice>* slices,
            absl::Status* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(rails_->mu);
  transport::RemoteOp MakeRemoteOp(const Piece& piece);
  void PostPieces(std::vector<Piece> pieces);
  void OnPiece(const Piece& piece, absl::Status status);
  absl::Status ClosedError() const;
  absl::Status NoRailError(RailSet keyed) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(rails_->mu);
  void LogPause(size_t rail, const RailStats& stats) const;

  const RailChannelOptions options_;
  const std::vector<RailLink> links_;
  const std::shared_ptr<PeerRails> rails_;
  bool numa_matters_ = false;  // the rails' devices sit on different nodes

  bool closed_ ABSL_GUARDED_BY(rails_->mu) = false;
  size_t ops_in_flight_ ABSL_GUARDED_BY(rails_->mu) = 0;
  // Rails whose channel this closed (their port went down).
  RailSet shut_ ABSL_GUARDED_BY(rails_->mu) = 0;
  // Rails whose QPs failed for a reason they are not to blame for: rebuilt
  // without a pause.
  RailSet blameless_ ABSL_GUARDED_BY(rails_->mu) = 0;
  // Since when a rebuild has been due without an idle moment.
  mutable absl::Time rebuild_due_since_ ABSL_GUARDED_BY(rails_->mu) =
      absl::InfiniteFuture();
};

// "rxe0/1->rxe0": a rail's local device and port and the peer's device,
// for logs.
std::string RailLabel(const RailLink& link);

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_RAIL_CHANNEL_H_
