// The verbs transport: connection set-up of RC QP pools over Peer.Connect.
//
// Both daemons pick one local RDMA port and GID (VerbsFabric). The
// connecting daemon (VerbsConnector) creates a pool of RC QPs in INIT and
// sends their endpoints (QPN, random PSN, GID, LID, MTU, READ depth) in
// Peer.Connect; the serving daemon (VerbsAcceptor) creates as many QPs,
// moves each RESET -> INIT -> RTR -> RTS pointing at the caller's, and
// answers with their endpoints; the caller then moves its own to RTR and RTS
// and wraps them in a VerbsChannel. The serving side's QPs respond to
// one-sided WRITE/READ (the NIC does the work) and receive the notices of
// WRITEs with an immediate: a NoticeReceiver per pool, on one of the
// runtime's serving loops, checks each and tells the region's owner
// (verbs_notice.h, notice_receiver.h).
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
#include "daemon/transport/verbs/queue_pair.h"
#include "daemon/transport/verbs/verbs_channel.h"

namespace rdmad::verbs {

struct VerbsTransportOptions {
  std::string device;                  // "" = first device with an ACTIVE port
  std::optional<uint32_t> gid_index;   // unset = ChooseGidIndex's choice
  uint32_t qps_per_peer = 4;           // pool size
  QpConfig qp;                         // port/gid_index are filled by Open
  uint64_t chunk_bytes = 1ull << 20;   // largest WR
  uint64_t read_chunk_bytes = kDefaultReadChunkBytes;  // largest READ WR
  // Most QPs one caller may ask for in a Connect, and most callers whose
  // pools the serving side keeps (the oldest is dropped past that).
  uint32_t max_qps_per_connect = 64;
  uint32_t max_accepted_peers = 256;
};

// The local end of the fabric: one opened device, port and GID index.
// Immutable after Open; thread-safe.
class VerbsFabric {
 public:
  // Chooses the device (options.device, or the first of `devices` with an
  // ACTIVE port), its first ACTIVE port and the GID index, and takes the
  // matching opened Device from `opened`. FailedPrecondition when there is
  // none, saying what to fix.
  static absl::StatusOr<std::shared_ptr<VerbsFabric>> Open(
      const std::vector<core::DeviceInfo>& devices,
      const std::vector<std::shared_ptr<Device>>& opened,
      VerbsTransportOptions options);

  const std::shared_ptr<Device>& device() const { return device_; }
  const VerbsTransportOptions& options() const { return options_; }
  // QP settings with the chosen port and GID index.
  const QpConfig& qp_config() const { return options_.qp; }

  // Creates `count` QPs in INIT on a fresh CQ sized for all of them.
  absl::StatusOr<std::vector<std::unique_ptr<QueuePair>>> CreateQps(
      uint32_t count, std::shared_ptr<CompletionQueue>* cq) const;

 private:
  VerbsFabric(std::shared_ptr<Device> device, VerbsTransportOptions options)
      : device_(std::move(device)), options_(std::move(options)) {}

  const std::shared_ptr<Device> device_;
  const VerbsTransportOptions options_;
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

 private:
  const std::shared_ptr<VerbsFabric> fabric_;
  runtime::IoRuntime* const runtime_;  // Not owned.
};

// transport::ConnectAcceptor for verbs: the serving half of the pools.
// Thread-safe.
class VerbsAcceptor final : public transport::ConnectAcceptor {
 public:
  // Each pool's NoticeReceiver goes on the next serving loop of `runtime`
  // (not owned; outlives the acceptor's pools).
  VerbsAcceptor(std::shared_ptr<VerbsFabric> fabric,
                runtime::IoRuntime* runtime)
      : fabric_(std::move(fabric)),
        runtime_(runtime),
        notices_(std::make_shared<NoticeTarget>()) {}

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

  // Destroys every serving QP (daemon shutdown).
  void Clear();

 private:
  struct Pool {
    uint64_t incarnation = 0;
    uint64_t generation = 0;
    uint64_t sequence = 0;  // acceptance order, to drop the oldest
    // Owns the pool's QPs and their CQ; destroying it destroys them (on
    // its loop).
    std::unique_ptr<NoticeReceiver> receiver;
    std::vector<uint32_t> remote_qpns;
  };

  const std::shared_ptr<VerbsFabric> fabric_;
  runtime::IoRuntime* const runtime_;  // Not owned.
  const std::shared_ptr<NoticeTarget> notices_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Pool> pools_ ABSL_GUARDED_BY(mu_);
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_VERBS_TRANSPORT_H_
