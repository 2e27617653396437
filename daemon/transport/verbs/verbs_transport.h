// The verbs transport: connection set-up of RC QP pools over Peer.Connect,
// one pool per rail.
//
// A rail is one local RDMA port (device, port, GID) paired with one of the
// peer's. The daemon's rails (VerbsFabric) are the devices of the config's
// `rails` (or `device`), by default every device with an ACTIVE port. The
// connecting daemon (VerbsConnector) creates a pool of RC QPs in INIT on
// each of its rails and sends their endpoints (QPN, random PSN, GID, LID,
// MTU, READ depth) in Peer.Connect: the first rail's as `qps`, the others'
// as `extra_rails`. The serving daemon (VerbsAcceptor) pairs the caller's
// rail k with its own rail k modulo its count, creates as many QPs there,
// moves each RESET -> INIT -> RTR -> RTS pointing at the caller's, and
// answers with their endpoints; the caller then moves its own to RTR and
// RTS, wraps each rail's pool in a VerbsChannel and the rails in one
// RailChannel (rail_channel.h), which spreads operations over them and
// survives a rail's failure. An rdmad that predates rails reads `qps` only
// and answers for it: one rail. The serving side's QPs respond to
// one-sided WRITE/READ (the NIC does the work) and receive the notices of
// WRITEs with an immediate: a NoticeReceiver per rail of each pool, on one
// of the runtime's serving loops, checks each and tells the region's owner
// (verbs_notice.h, notice_receiver.h). Those receives come from one shared
// receive queue per device (notice_srq.h), so they do not grow with peers.
//
// Pools grow with their traffic: given a ConnectSender (UseSender), the
// connecting daemon starts each rail's pool with one QP, and the
// VerbsChannel asks for more when its send queues stay full (qp_growth.h),
// up to qps_per_peer: a Connect with `grow` set and the same (incarnation,
// generation) carries the new QPs, which the serving daemon adds to that
// pool, at RTS, before it answers (never to another pool: a grow for a
// pool that was replaced is refused). Without a sender (a connector used
// on its own), pools have qps_per_peer QPs from the start.
//
// Each Connect carries a generation number; the serving side keeps one pool
// per caller (by its Peer address) and replaces it when a newer generation
// or a new incarnation of the caller arrives, so that a stale or repeated
// handshake can never re-point a pool that is in use.
//
// Example (daemon wiring):
//   RDMAD_ASSIGN_OR_RETURN(auto fabric, VerbsFabric::Open(devices, options));
//   auto connector = std::make_unique<VerbsConnector>(fabric, runtime);
//   auto acceptor = std::make_unique<VerbsAcceptor>(fabric, runtime);
//   ...once the region table and the notification sink exist:
//   acceptor->ServeNotices(regions, queues);
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_TRANSPORT_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/device_info.h"
#include "daemon/runtime/io_runtime.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/completion_queue.h"
#include "daemon/core/notification_sink.h"
#include "daemon/core/region_table.h"
#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/notice_receiver.h"
#include "daemon/transport/verbs/notice_srq.h"
#include "daemon/transport/verbs/port_monitor.h"
#include "daemon/transport/verbs/queue_pair.h"
#include "daemon/transport/verbs/rail_channel.h"
#include "daemon/transport/verbs/rail_scheduler.h"
#include "daemon/transport/verbs/verbs_channel.h"

namespace rdmad::verbs {

// Rails reserved for regions by name (config rail_pins).
struct RailPinConfig {
  std::string region_prefix;
  std::vector<std::string> devices;
};

struct VerbsTransportOptions {
  std::string device;                  // one rail on this device
  // The rails' devices. Empty: `device`, else every device with an ACTIVE
  // port, in name order.
  std::vector<std::string> rails;
  std::optional<uint32_t> gid_index;   // unset = ChooseGidIndex's choice
  uint32_t qps_per_peer = 4;           // pool size
  QpConfig qp;                         // port/gid_index are filled by Open
  uint64_t chunk_bytes = 1ull << 20;   // largest WR
  uint64_t read_chunk_bytes = kDefaultReadChunkBytes;  // largest READ WR
  // Most QPs one caller may ask for in a Connect, and most callers whose
  // pools the serving side keeps (the oldest is dropped past that).
  uint32_t max_qps_per_connect = 64;
  uint32_t max_accepted_peers = 256;
  // Stripe threshold and pauses (config rail_stripe_bytes,
  // rail_pause_seconds, rail_pause_max_seconds).
  RailSchedulerOptions rail;
  std::vector<RailPinConfig> pins;
  // Peers whose rail history (pauses, bandwidths, counters) is kept.
  size_t max_rail_peers = 4096;
};

// One local rail: an opened device and the port and GID index on it.
struct LocalRail {
  std::shared_ptr<Device> device;
  QpConfig qp;         // the transport's QP settings with this port and GID
  int numa_node = -1;  // the device's NUMA node (sysfs); -1 unknown
};

// The local end of the fabric: the rails. Immutable after Open;
// thread-safe.
class VerbsFabric {
 public:
  // Chooses the rails (see VerbsTransportOptions::rails): on each device its
  // first ACTIVE port and the GID index, with the matching opened Device
  // from `opened`; resolves the pins; starts a PortMonitor on the rails'
  // devices. FailedPrecondition when there is no rail, or a listed device
  // is not present, saying what to fix; a listed device without an ACTIVE
  // port is left out with a warning while another rail remains.
  static absl::StatusOr<std::shared_ptr<VerbsFabric>> Open(
      const std::vector<core::DeviceInfo>& devices,
      const std::vector<std::shared_ptr<Device>>& opened,
      VerbsTransportOptions options);

  const std::vector<LocalRail>& rails() const { return rails_; }
  const VerbsTransportOptions& options() const { return options_; }
  const std::vector<RailPinSet>& pins() const { return pins_; }
  // Null when the devices' events cannot be read (ports are then taken as
  // ACTIVE; failing QPs still pause their rails).
  PortMonitor* monitor() const { return monitor_.get(); }
  PeerRailsRegistry& peer_rails() const { return *peer_rails_; }

  // Creates `count` QPs in INIT on rail `rail`, on a fresh CQ sized for
  // all of them; with `srq`, taking their receives from it (not owned: it
  // outlives the QPs).
  absl::StatusOr<std::vector<std::unique_ptr<QueuePair>>> CreateQps(
      size_t rail, uint32_t count, std::shared_ptr<CompletionQueue>* cq,
      ibv_srq* srq = nullptr) const;
  // Creates `count` QPs in INIT on rail `rail` whose completions go to
  // `cq`, which the caller has sized for them (CqEntriesFor).
  absl::StatusOr<std::vector<std::unique_ptr<QueuePair>>> CreateQpsOn(
      size_t rail, uint32_t count, const std::shared_ptr<CompletionQueue>& cq,
      ibv_srq* srq = nullptr) const;
  // Entries a CQ of rail `rail` needs for `count` QPs (capped at the
  // device's max_cqe).
  int CqEntriesFor(size_t rail, uint32_t count) const;

 private:
  VerbsFabric(std::vector<LocalRail> rails, VerbsTransportOptions options,
              std::vector<RailPinSet> pins,
              std::unique_ptr<PortMonitor> monitor);

  const std::vector<LocalRail> rails_;
  const VerbsTransportOptions options_;
  const std::vector<RailPinSet> pins_;
  const std::unique_ptr<PortMonitor> monitor_;
  const std::unique_ptr<PeerRailsRegistry> peer_rails_;
};

// Conversions between the wire form (rdmad.v1.QpEndpoint) and QpEndpoint.
void ToProto(const QpEndpoint& endpoint, const std::string& device,
             v1::QpEndpoint* out);
// InvalidArgument naming the field when the GID is not 16 bytes.
absl::StatusOr<QpEndpoint> FromProto(const v1::QpEndpoint& endpoint);

// transport::Connector for verbs. Thread-safe.
class VerbsConnector final : public transport::Connector {
 public:
  // Each channel goes on the next loop of `runtime` (not owned).
  VerbsConnector(std::shared_ptr<VerbsFabric> fabric,
                 runtime::IoRuntime* runtime)
      : fabric_(std::move(fabric)), runtime_(runtime) {}

  core::TransportKind kind() const override {
    return core::TransportKind::kVerbs;
  }
  bool Usable(std::string* why) const override;
  absl::StatusOr<std::unique_ptr<Pending>> Prepare(
      const std::string& peer, v1::ConnectRequest* request) override;
  // With a sender, pools start with one QP and grow with their traffic.
  void UseSender(transport::ConnectSender sender) override;

 private:
  const std::shared_ptr<VerbsFabric> fabric_;
  runtime::IoRuntime* const runtime_;  // Not owned.
  mutable absl::Mutex mu_;
  transport::ConnectSender sender_ ABSL_GUARDED_BY(mu_);
};

// transport::ConnectAcceptor for verbs: the serving half of the pools.
// Thread-safe.
class VerbsAcceptor final : public transport::ConnectAcceptor {
 public:
  // Each pool's NoticeReceiver goes on the next serving loop of `runtime`
  // (not owned; outlives the acceptor's pools). Creates each rail device's
  // shared receive queue for notices (kNoticeSharedReceives receives); a
  // device that has none receives notices per QP.
  VerbsAcceptor(std::shared_ptr<VerbsFabric> fabric,
                runtime::IoRuntime* runtime);

  // Where the notices of WRITEs with an immediate go: checked against
  // `regions`, told to `sink`. Both not owned; they must outlive Clear().
  // Until this is called, notices are answered "not served".
  void ServeNotices(const core::RegionTable* regions,
                    core::NotificationSink* sink) {
    notices_->Set(regions, sink);
  }
  // What the pools' receivers did with the notices so far.
  NoticeCounts notice_counts() const { return notices_->counts(); }

  core::TransportKind kind() const override {
    return core::TransportKind::kVerbs;
  }
  absl::Status Accept(const v1::ConnectRequest& request,
                      const std::string& caller,
                      v1::ConnectResponse* response) override;

  // The responder QPs serving each caller (its Peer address), for ListQps.
  std::vector<Served> ListServed() const override;
  // Each device's shared receive queue for notices, for ListDevices.
  std::vector<NoticeQueue> NoticeQueues() const override;

  // Destroys every serving QP (daemon shutdown).
  void Clear();

 private:
  // The QPs serving one of the caller's rails.
  struct RailPool {
    // Each owns some of the rail's QPs and their CQ (the first handshake's,
    // then each grow's); destroying one destroys them (on its loop).
    std::vector<std::unique_ptr<NoticeReceiver>> receivers;
    // The caller's QP numbers, in the order of the receivers' QPs.
    std::vector<uint32_t> remote_qpns;
    std::string device;
  };
  struct Pool {
    uint64_t incarnation = 0;
    uint64_t generation = 0;
    uint64_t sequence = 0;  // acceptance order, to drop the oldest
    std::vector<RailPool> rails;  // the caller's rail order
  };

  // Adds the QPs of a Connect with `grow` set to the pool its handshake
  // built.
  absl::Status AcceptGrow(const v1::ConnectRequest& request,
                          const std::string& caller,
                          v1::ConnectResponse* response);

  // Creates and connects the QPs for the caller's rail `index`
  // (`remotes`), on this daemon's rail `index` modulo its count, with
  // their receiver (added to `pool`); fills `out` with this side's
  // endpoints.
  absl::Status AcceptRail(size_t index,
                          const google::protobuf::RepeatedPtrField<
                              v1::QpEndpoint>& remotes,
                          const v1::ConnectRequest& request,
                          const std::string& caller, RailPool* pool,
                          google::protobuf::RepeatedPtrField<v1::QpEndpoint>*
                              out);

  const std::shared_ptr<VerbsFabric> fabric_;
  runtime::IoRuntime* const runtime_;  // Not owned.
  const std::shared_ptr<NoticeTarget> notices_;
  // Each rail device's shared receive queue for notices, by device name
  // (set in the constructor, then read only). The pools' receivers hold
  // them too, so each outlives the QPs created with it.
  absl::flat_hash_map<std::string, std::shared_ptr<NoticeSharedReceives>>
      shared_receives_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Pool> pools_ ABSL_GUARDED_BY(mu_);
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_TRANSPORT_H_
