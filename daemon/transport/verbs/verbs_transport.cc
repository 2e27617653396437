#include "daemon/transport/verbs/verbs_transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/transport/handshake.h"
#include "common/status_macros.h"
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

// Creates rail `rail`'s QPs for a Connect into `pending`, and their
// endpoints into `out`.
absl::Status PrepareRail(
    const VerbsFabric& fabric, size_t rail, PendingRail* pending,
    google::protobuf::RepeatedPtrField<v1::QpEndpoint>* out) {
  RDMAD_ASSIGN_OR_RETURN(
      pending->qps,
      fabric.CreateQps(rail, fabric.options().qps_per_peer, &pending->cq));
  for (const auto& qp : pending->qps) {
    RDMAD_ASSIGN_OR_RETURN(QpEndpoint e, qp->LocalEndpoint());
    ToProto(e, fabric.rails()[rail].device->name(), out->Add());
  }
  return absl::OkStatus();
}

// The QPs of one Connect, every rail's, between Prepare and the answer.
class PendingPool final : public transport::Connector::Pending {
 public:
  PendingPool(std::shared_ptr<VerbsFabric> fabric, runtime::EventLoop* loop,
              std::string peer, uint64_t generation,
              std::vector<PendingRail> rails)
      : fabric_(std::move(fabric)),
        loop_(loop),
        peer_(std::move(peer)),
        generation_(generation),
        rails_(std::move(rails)) {}

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
        const auto& answer =
            r == 0 ? response.qps() : response.extra_rails(r - 1).qps();
        failed = answer.empty()
                     ? absl::UnavailableError(absl::StrCat(
                           "peer ", peer_, " could not set up its side of "
                           "the rail"))
                     : FinishRail(r, answer, &link);
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
  // Connects rail `r`'s QPs to the peer's `answer` and wraps them in a
  // VerbsChannel, into `link`.
  absl::Status FinishRail(
      size_t r,
      const google::protobuf::RepeatedPtrField<v1::QpEndpoint>& answer,
      RailLink* link) {
    PendingRail& rail = rails_[r];
    if (static_cast<size_t>(answer.size()) != rail.qps.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "peer answered with ", answer.size(), " QPs for our ",
          rail.qps.size(), " on rail ", r));
    }
    std::vector<uint32_t> remote_qpns;
    std::string remote_device;
    for (size_t i = 0; i < rail.qps.size(); ++i) {
      const v1::QpEndpoint& wire = answer[static_cast<int>(i)];
      RDMAD_ASSIGN_OR_RETURN(QpEndpoint remote, FromProto(wire));
      if (i == 0) remote_device = wire.device();
      RDMAD_RETURN_IF_ERROR(rail.qps[i]->Connect(remote));
      remote_qpns.push_back(remote.qpn);
    }
    const LocalRail& local = fabric_->rails()[r];
    VerbsChannelOptions options;
    options.loop = loop_;
    options.peer = peer_;
    options.local_device = local.device->name();
    options.remote_device = remote_device;
    options.generation = generation_;
    options.chunk_bytes = fabric_->options().chunk_bytes;
    options.read_chunk_bytes = fabric_->options().read_chunk_bytes;
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
};

}  // namespace

bool VerbsConnector::Usable(std::string* why) const {
  if (fabric_ != nullptr) return true;
  if (why != nullptr) *why = "this daemon has no usable RDMA port";
  return false;
}

absl::StatusOr<std::unique_ptr<transport::Connector::Pending>>
VerbsConnector::Prepare(const std::string& peer, v1::ConnectRequest* request) {
  if (fabric_ == nullptr) {
    return absl::FailedPreconditionError("this daemon has no usable RDMA port");
  }
  std::vector<PendingRail> rails(fabric_->rails().size());
  absl::Status first_error;
  size_t prepared = 0;
  for (size_t r = 0; r < rails.size(); ++r) {
    // The first rail's QPs where an rdmad without rails looks for them.
    auto* out = r == 0 ? request->mutable_qps()
                       : request->add_extra_rails()->mutable_qps();
    rails[r].error = PrepareRail(*fabric_, r, &rails[r], out);
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
      std::move(rails)));
}

VerbsAcceptor::VerbsAcceptor(std::shared_ptr<VerbsFabric> fabric,
                             runtime::IoRuntime* runtime)
    : fabric_(std::move(fabric)),
      runtime_(runtime),
      notices_(std::make_shared<NoticeTarget>()) {
  for (const auto& rail : fabric_->rails()) {
    const std::string& name = rail.device->name();
    if (shared_receives_.contains(name)) continue;
    auto shared =
        NoticeSharedReceives::Create(rail.device, kNoticeSharedReceives);
    if (!shared.ok()) {
      spdlog::warn("verbs notices on {}: no shared receive queue ({}): each "
                   "pool posts its own receives",
                   name, std::string(shared.status().message()));
      continue;
    }
    shared_receives_.emplace(name, *std::move(shared));
  }
}

absl::Status VerbsAcceptor::AcceptRail(
    size_t index,
    const google::protobuf::RepeatedPtrField<v1::QpEndpoint>& remotes_wire,
    const v1::ConnectRequest& request, const std::string& caller,
    RailPool* pool,
    google::protobuf::RepeatedPtrField<v1::QpEndpoint>* out) {
  const uint32_t count = static_cast<uint32_t>(remotes_wire.size());
  std::vector<QpEndpoint> remotes;
  for (const auto& wire : remotes_wire) {
    RDMAD_ASSIGN_OR_RETURN(QpEndpoint e, FromProto(wire));
    remotes.push_back(e);
  }
  // Rails pair by position; a caller with more rails than this daemon
  // shares this daemon's rails among its own.
  const size_t local = index % fabric_->rails().size();
  const std::string& device = fabric_->rails()[local].device->name();
  std::shared_ptr<CompletionQueue> cq;
  std::shared_ptr<NoticeSharedReceives> shared;
  if (auto it = shared_receives_.find(device); it != shared_receives_.end()) {
    shared = it->second;
  }
  RDMAD_ASSIGN_OR_RETURN(
      auto qps, fabric_->CreateQps(local, count, &cq,
                                   shared != nullptr ? shared->srq() : nullptr));
  for (uint32_t i = 0; i < count; ++i) {
    // Our QP goes to RTS now; the caller's reaches RTR after our answer and
    // sends nothing before that, so no packet finds a QP not ready for it.
    RDMAD_RETURN_IF_ERROR(qps[i]->Connect(remotes[i]));
    RDMAD_ASSIGN_OR_RETURN(QpEndpoint e, qps[i]->LocalEndpoint());
    ToProto(e, device, out->Add());
    pool->remote_qpns.push_back(remotes[i].qpn);
  }
  // The receives for the caller's notices are posted before it has our
  // answer, so its first notice finds one.
  NoticeReceiverOptions receiver;
  receiver.loop = runtime_->PickServing();
  receiver.peer = request.address();
  receiver.caller = caller;
  receiver.device = device;
  receiver.target = notices_;
  receiver.shared = std::move(shared);
  RDMAD_ASSIGN_OR_RETURN(
      pool->receiver,
      NoticeReceiver::Start(std::move(receiver), std::move(cq), std::move(qps)));
  pool->device = device;
  return absl::OkStatus();
}

absl::Status VerbsAcceptor::Accept(const v1::ConnectRequest& request,
                                   const std::string& caller,
                                   v1::ConnectResponse* response) {
  const uint32_t most = fabric_->options().max_qps_per_connect;
  const size_t rails = 1 + static_cast<size_t>(request.extra_rails_size());
  if (rails > kMaxRails) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a verbs Connect may carry at most ", kMaxRails, " rails, got ",
        rails));
  }
  size_t offered = 0;
  for (size_t r = 0; r < rails; ++r) {
    const int count = r == 0 ? request.qps_size()
                             : request.extra_rails(r - 1).qps_size();
    if (static_cast<uint32_t>(count) > most) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a verbs Connect must carry at most ", most,
          " QP endpoints per rail, got ", count, " on rail ", r));
    }
    offered += count > 0;
  }
  if (offered == 0) {
    return absl::InvalidArgumentError(
        "a verbs Connect must carry QP endpoints for at least one rail");
  }
  if (request.address().empty()) {
    return absl::InvalidArgumentError(
        "a verbs Connect must name the caller's Peer address");
  }
  {
    // A handshake older than the pool in use must not replace it.
    absl::MutexLock lock(&mu_);
    auto it = pools_.find(request.address());
    if (it != pools_.end() &&
        transport::HandshakeIsStale(
            transport::HandshakeId{it->second.incarnation,
                                   it->second.generation},
            transport::HandshakeId{request.incarnation(),
                                   request.generation()})) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stale verbs Connect from ", request.address(), ": generation ",
          request.generation(), " is not newer than ", it->second.generation));
    }
  }
  Pool pool;
  pool.incarnation = request.incarnation();
  pool.generation = request.generation();
  pool.rails.resize(rails);
  absl::Status first_error;
  size_t served = 0;
  for (size_t r = 0; r < rails; ++r) {
    const auto& remotes =
        r == 0 ? request.qps() : request.extra_rails(r - 1).qps();
    auto* out = r == 0 ? response->mutable_qps()
                       : response->add_extra_rails()->mutable_qps();
    if (remotes.empty()) continue;  // the caller could not set it up
    google::protobuf::RepeatedPtrField<v1::QpEndpoint> answer;
    absl::Status s =
        AcceptRail(r, remotes, request, caller, &pool.rails[r], &answer);
    if (s.ok()) {
      out->Swap(&answer);
      ++served;
      continue;
    }
    // Answered without QPs (this side's port is down, say): the caller
    // leaves the rail out and carries on over the others.
    pool.rails[r] = RailPool{};
    if (first_error.ok()) first_error = s;
    spdlog::warn("verbs: cannot serve rail {} of {}: {}", r,
                 request.address(), std::string(s.message()));
  }
  if (served == 0) return first_error;
  Pool old;
  {
    absl::MutexLock lock(&mu_);
    auto it = pools_.find(request.address());
    if (it != pools_.end()) {
      if (transport::HandshakeIsStale(
              transport::HandshakeId{it->second.incarnation,
                                     it->second.generation},
              transport::HandshakeId{request.incarnation(),
                                     request.generation()})) {
        // A newer handshake won the race while we built ours.
        return absl::FailedPreconditionError(absl::StrCat(
            "stale verbs Connect from ", request.address()));
      }
      old = std::move(it->second);
    }
    pool.sequence = ++sequence_;
    pools_[request.address()] = std::move(pool);
    if (pools_.size() > fabric_->options().max_accepted_peers) {
      auto oldest = pools_.begin();
      for (auto i = pools_.begin(); i != pools_.end(); ++i) {
        if (i->second.sequence < oldest->second.sequence) oldest = i;
      }
      spdlog::warn("verbs: dropping the QP pool of {}: more than {} peers",
                   oldest->first, fabric_->options().max_accepted_peers);
      pools_.erase(oldest);
    }
  }
  spdlog::debug("verbs: serving {} rail(s) for {} (generation {})", rails,
                request.address(), request.generation());
  // `old` is destroyed here, outside the lock: its QPs go away, and any WR
  // the caller still had on them fails on the caller's side.
  return absl::OkStatus();
}

std::vector<transport::ConnectAcceptor::Served> VerbsAcceptor::ListServed()
    const {
  std::vector<Served> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [peer, pool] : pools_) {
    for (size_t r = 0; r < pool.rails.size(); ++r) {
      const RailPool& rail = pool.rails[r];
      if (rail.receiver == nullptr) continue;  // not set up
      const auto& qps = rail.receiver->qps();
      for (size_t i = 0; i < qps.size(); ++i) {
        Served s;
        s.peer = peer;
        transport::ConnectionInfo& c = s.connection;
        c.index = static_cast<uint32_t>(i);
        c.rail = static_cast<uint32_t>(r);
        c.device = rail.device;
        c.local_qpn = qps[i]->qpn();
        c.remote_qpn = rail.remote_qpns[i];
        auto state = qps[i]->QueryState();
        c.qp_state = state.ok() ? QpStateName(*state) : "UNKNOWN";
        c.state = state.ok() && *state == IBV_QPS_RTS
                      ? transport::ConnectionState::kReady
                      : transport::ConnectionState::kError;
        c.path_mtu = qps[i]->config().path_mtu;
        c.generation = pool.generation;
        out.push_back(std::move(s));
      }
    }
  }
  return out;
}

void VerbsAcceptor::Clear() {
  absl::flat_hash_map<std::string, Pool> pools;
  {
    absl::MutexLock lock(&mu_);
    pools.swap(pools_);
  }
}

}  // namespace rdmad::verbs
