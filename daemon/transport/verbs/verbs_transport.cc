#include "daemon/transport/verbs/verbs_transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/transport/handshake.h"
#include "daemon/transport/verbs/connect_rails.h"
#include "daemon/transport/verbs/conversions.h"
#include "spdlog/spdlog.h"

namespace rdmad::verbs {

void ToProto(const QpEndpoint& e, const std::string& device,
             v1::QpEndpoint* out) {
  out->set_qpn(e.qpn);
  out->set_psn(e.psn);
  out->set_gid(std::string(e.gid.begin(), e.gid.end()));
  out->set_gid_index(e.gid_index);
  out->set_lid(e.lid);
  out->set_mtu(e.mtu);
  out->set_max_rd_atomic(e.max_rd_atomic);
  out->set_device(device);
}

absl::StatusOr<QpEndpoint> FromProto(const v1::QpEndpoint& e) {
  QpEndpoint out;
  if (e.gid().size() != out.gid.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "QpEndpoint.gid must be 16 bytes, got ", e.gid().size()));
  }
  std::copy(e.gid().begin(), e.gid().end(), out.gid.begin());
  out.qpn = e.qpn();
  out.psn = e.psn();
  out.gid_index = e.gid_index();
  out.lid = e.lid();
  out.mtu = e.mtu();
  out.max_rd_atomic = e.max_rd_atomic();
  return out;
}

namespace {

// One rail's QPs of a Connect between Prepare and the peer's answer.
struct PendingRail {
  std::shared_ptr<CompletionQueue> cq;
  std::vector<std::unique_ptr<QueuePair>> qps;
  absl::Status error;  // why it could not be prepared (sent without QPs)
};

// Appends the endpoints of `qps` (on rail `rail`) to `out`.
absl::Status AddEndpoints(
    const VerbsFabric& fabric, size_t rail,
    const std::vector<std::unique_ptr<QueuePair>>& qps,
    google::protobuf::RepeatedPtrField<v1::QpEndpoint>* out) {
  for (const auto& qp : qps) {
    RDMAD_ASSIGN_OR_RETURN(QpEndpoint e, qp->LocalEndpoint());
    ToProto(e, fabric.rails()[rail].device->name(), out->Add());
  }
  return absl::OkStatus();
}

// Creates rail `rail`'s `count` QPs for a Connect into `pending`, and
// their endpoints into `out`.
absl::Status PrepareRail(
    const VerbsFabric& fabric, size_t rail, uint32_t count,
    PendingRail* pending,
    google::protobuf::RepeatedPtrField<v1::QpEndpoint>* out) {
  RDMAD_ASSIGN_OR_RETURN(pending->qps,
                         fabric.CreateQps(rail, count, &pending->cq));
  return AddEndpoints(fabric, rail, pending->qps, out);
}

// Connects `qps` to the peer's `answer`, QP by QP; the peer's QP numbers.
absl::StatusOr<std::vector<uint32_t>> ConnectTo(
    const std::vector<std::unique_ptr<QueuePair>>& qps,
    const google::protobuf::RepeatedPtrField<v1::QpEndpoint>& answer,
    size_t rail) {
  if (static_cast<size_t>(answer.size()) != qps.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer answered with ", answer.size(), " QPs for our ", qps.size(),
        " on rail ", rail));
  }
  std::vector<uint32_t> remote_qpns;
  for (size_t i = 0; i < qps.size(); ++i) {
    RDMAD_ASSIGN_OR_RETURN(QpEndpoint remote,
                           FromProto(answer[static_cast<int>(i)]));
    RDMAD_RETURN_IF_ERROR(qps[i]->Connect(remote));
    remote_qpns.push_back(remote.qpn);
  }
  return remote_qpns;
}

// What growing one rail's pool needs to know about its handshake.
struct GrowTarget {
  std::shared_ptr<VerbsFabric> fabric;
  transport::ConnectSender sender;
  std::string peer;
  size_t rail = 0;
  uint64_t generation = 0;        // of the handshake that built the pool
  uint64_t peer_incarnation = 0;  // the run of the peer that serves it
};

// The peer's answer to a grow of `qps`, checked (untrusted input), and the
// QPs connected to it.
absl::StatusOr<GrownQps> FinishGrow(
    const GrowTarget& target, std::vector<std::unique_ptr<QueuePair>> qps,
    absl::StatusOr<v1::ConnectResponse> answer) {
  if (!answer.ok()) return std::move(answer).status();
  if (answer->incarnation() != target.peer_incarnation ||
      answer->generation() != target.generation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "peer ", target.peer, " answered a grow for another handshake"));
  }
  GrownQps grown;
  RDMAD_ASSIGN_OR_RETURN(grown.remote_qpns,
                         ConnectTo(qps, RailQpsOf(*answer, target.rail),
                                   target.rail));
  grown.qps = std::move(qps);
  return grown;
}

// The channel's GrowQps for one rail: QPs on its CQ (grown first), a
// Connect with `grow` set for the same handshake, and the answer's QPs
// connected to ours.
GrowQps GrowFor(GrowTarget target) {
  return [target = std::move(target)](uint32_t count, uint32_t total,
                                      std::shared_ptr<CompletionQueue> cq,
                                      GrowDone done) {
    const VerbsFabric& fabric = *target.fabric;
    absl::Status grown_cq = cq->Grow(fabric.CqEntriesFor(target.rail, total));
    if (!grown_cq.ok()) return done(grown_cq);
    auto qps = fabric.CreateQpsOn(target.rail, count, cq);
    if (!qps.ok()) return done(qps.status());
    v1::ConnectRequest request;
    request.set_grow(true);
    request.set_transport(v1::TRANSPORT_VERBS);
    request.set_generation(target.generation);
    request.set_target_incarnation(target.peer_incarnation);
    if (absl::Status s =
            AddEndpoints(fabric, target.rail, *qps, RailQps(&request, target.rail));
        !s.ok()) {
      return done(s);
    }
    // The QPs wait in INIT for the answer; destroyed with the callback if
    // none comes.
    auto held =
        std::make_shared<std::vector<std::unique_ptr<QueuePair>>>(*std::move(qps));
    target.sender(target.peer, std::move(request),
                  [target, held, done = std::move(done)](
                      absl::StatusOr<v1::ConnectResponse> answer) mutable {
                    done(FinishGrow(target, std::move(*held), std::move(answer)));
                  });
  };
}

// The QPs of one Connect, every rail's, between Prepare and the answer.
class PendingPool final : public transport::Connector::Pending {
 public:
  // `sender`: how the channels' pools grow; null: they do not.
  PendingPool(std::shared_ptr<VerbsFabric> fabric, runtime::EventLoop* loop,
              std::string peer, uint64_t generation,
              std::vector<PendingRail> rails, transport::ConnectSender sender)
      : fabric_(std::move(fabric)),
        loop_(loop),
        peer_(std::move(peer)),
        generation_(generation),
        rails_(std::move(rails)),
        sender_(std::move(sender)) {}

  absl::StatusOr<std::shared_ptr<transport::DataChannel>> Finish(
      const v1::ConnectResponse& response) override {
    std::vector<RailLink> links(rails_.size());
    absl::Status first_error;
    size_t working = 0;
    for (size_t r = 0; r < rails_.size(); ++r) {
      const LocalRail& local = fabric_->rails()[r];
      RailLink& link = links[r];
      link.device = local.device->name();
      link.port = local.qp.port;
      link.numa_node = local.numa_node;
      // A rail that fails here is left out of this channel and paused (a
      // port that went down meanwhile): the others carry the peer's data.
      absl::Status failed = rails_[r].error;
      if (failed.ok()) {
        // An rdmad without rails answers for the first one only: the others
        // are dropped (their QPs with this PendingPool), never rebuilt.
        if (r > 0 && static_cast<int>(r) > response.extra_rails_size()) {
          continue;
        }
        const auto& answer = RailQpsOf(response, r);
        failed = answer.empty()
                     ? absl::UnavailableError(absl::StrCat(
                           "peer ", peer_, " could not set up its side of "
                           "the rail"))
                     : FinishRail(r, answer, response.incarnation(), &link);
      }
      if (failed.ok()) {
        ++working;
        continue;
      }
      link.setup_error = std::string(failed.message());
      if (first_error.ok()) first_error = failed;
      spdlog::warn("peer {}: rail {} on {} left out: {}", peer_, r,
                   link.device, link.setup_error);
    }
    if (working == 0) return first_error;
    if (rails_.size() > 1 && response.extra_rails_size() == 0) {
      spdlog::info("peer {} answered for one rail (an rdmad without rails?): "
                   "its data goes over {} only",
                   peer_, links[0].device);
    }
    RailChannelOptions options;
    options.peer = peer_;
    options.rails = fabric_->peer_rails().For(peer_, rails_.size());
    options.pins = fabric_->pins();
    if (PortMonitor* monitor = fabric_->monitor()) {
      std::vector<std::pair<std::string, uint32_t>> ports;
      for (const RailLink& link : links) ports.emplace_back(link.device, link.port);
      options.port_active = [monitor, ports = std::move(ports)](size_t r) {
        return monitor->Active(ports[r].first, ports[r].second);
      };
    }
    std::shared_ptr<RailChannel> channel =
        RailChannel::Create(std::move(options), std::move(links));
    if (PortMonitor* monitor = fabric_->monitor()) monitor->Subscribe(channel);
    return std::shared_ptr<transport::DataChannel>(std::move(channel));
  }

 private:
  // Connects rail `r`'s QPs to the peer's `answer` (from the run
  // `peer_incarnation`) and wraps them in a VerbsChannel, into `link`.
  absl::Status FinishRail(
      size_t r,
      const google::protobuf::RepeatedPtrField<v1::QpEndpoint>& answer,
      uint64_t peer_incarnation, RailLink* link) {
    PendingRail& rail = rails_[r];
    RDMAD_ASSIGN_OR_RETURN(std::vector<uint32_t> remote_qpns,
                           ConnectTo(rail.qps, answer, r));
    const std::string remote_device = answer[0].device();
    const LocalRail& local = fabric_->rails()[r];
    VerbsChannelOptions options;
    options.loop = loop_;
    options.peer = peer_;
    options.local_device = local.device->name();
    options.remote_device = remote_device;
    options.generation = generation_;
    options.chunk_bytes = fabric_->options().chunk_bytes;
    options.read_chunk_bytes = fabric_->options().read_chunk_bytes;
    const uint32_t most = fabric_->options().qps_per_peer;
    if (sender_ && rail.qps.size() < most) {
      options.growth.max_qps = most;
      options.grow = GrowFor(GrowTarget{fabric_, sender_, peer_, r,
                                        generation_, peer_incarnation});
    }
    RDMAD_ASSIGN_OR_RETURN(
        auto channel,
        VerbsChannel::Create(std::move(options), std::move(rail.cq),
                             std::move(rail.qps), std::move(remote_qpns)));
    link->channel = std::move(channel);
    link->remote_device = remote_device;
    return absl::OkStatus();
  }

  const std::shared_ptr<VerbsFabric> fabric_;
  runtime::EventLoop* const loop_;  // Not owned.
  const std::string peer_;
  const uint64_t generation_;
  std::vector<PendingRail> rails_;
  const transport::ConnectSender sender_;
};

}  // namespace

bool VerbsConnector::Usable(std::string* why) const {
  if (fabric_ != nullptr) return true;
  if (why != nullptr) *why = "this daemon has no usable RDMA port";
  return false;
}

void VerbsConnector::UseSender(transport::ConnectSender sender) {
  absl::MutexLock lock(&mu_);
  sender_ = std::move(sender);
}

absl::StatusOr<std::unique_ptr<transport::Connector::Pending>>
VerbsConnector::Prepare(const std::string& peer, v1::ConnectRequest* request) {
  if (fabric_ == nullptr) {
    return absl::FailedPreconditionError("this daemon has no usable RDMA port");
  }
  transport::ConnectSender sender;
  {
    absl::MutexLock lock(&mu_);
    sender = sender_;
  }
  // A pool that can grow starts with one QP: most peers of a large mesh
  // never need more.
  const uint32_t count = sender ? 1 : fabric_->options().qps_per_peer;
  std::vector<PendingRail> rails(fabric_->rails().size());
  absl::Status first_error;
  size_t prepared = 0;
  for (size_t r = 0; r < rails.size(); ++r) {
    // The first rail's QPs where an rdmad without rails looks for them.
    auto* out = RailQps(request, r);
    rails[r].error = PrepareRail(*fabric_, r, count, &rails[r], out);
    if (rails[r].error.ok()) {
      ++prepared;
      continue;
    }
    // Sent without QPs (its port is down, say): the others go on.
    out->Clear();
    rails[r].qps.clear();
    if (first_error.ok()) first_error = rails[r].error;
    spdlog::warn("peer {}: rail {} on {} cannot be set up: {}", peer,
                 r, fabric_->rails()[r].device->name(),
                 std::string(rails[r].error.message()));
  }
  if (prepared == 0) return first_error;
  request->set_transport(v1::TRANSPORT_VERBS);
  // Every rail of a peer on one loop: the rails' completions of one
  // operation are then never handled at the same time.
  return std::unique_ptr<Pending>(std::make_unique<PendingPool>(
      fabric_, runtime_->PickEngine(), peer, request->generation(),
      std::move(rails), std::move(sender)));
}

}  // namespace rdmad::verbs
