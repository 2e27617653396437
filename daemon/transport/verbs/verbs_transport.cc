#include "daemon/transport/handshake.h"
#include "daemon/transport/verbs/verbs_transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/transport/verbs/conversions.h"
#include "daemon/transport/verbs/gid_selection.h"
#include "spdlog/spdlog.h"

namespace rdmad::verbs {

absl::StatusOr<std::shared_ptr<VerbsFabric>> VerbsFabric::Open(
    const std::vector<core::DeviceInfo>& devices,
    const std::vector<std::shared_ptr<Device>>& opened,
    VerbsTransportOptions options) {
  const core::DeviceInfo* info = nullptr;
  std::string states;
  for (const auto& d : devices) {
    if (!options.device.empty() && d.name != options.device) continue;
    if (ChooseActivePort(d).ok()) {
      info = &d;
      break;
    }
    absl::StrAppend(&states, states.empty() ? "" : ", ", d.name);
  }
  if (info == nullptr) {
    return absl::FailedPreconditionError(
        options.device.empty()
            ? absl::StrCat("no RDMA device has an ACTIVE port (devices: ",
                           states.empty() ? "none" : states,
                           "): check the link with ibv_devinfo")
            : absl::StrCat("RDMA device '", options.device,
                           "' is not present or has no ACTIVE port: check "
                           "ibv_devinfo, or leave the device unset"));
  }
  RDMAD_ASSIGN_OR_RETURN(const uint32_t port, ChooseActivePort(*info));
  RDMAD_ASSIGN_OR_RETURN(
      const uint32_t gid_index,
      ChooseGidIndex(info->ports[port - 1], options.gid_index));
  std::shared_ptr<Device> device;
  for (const auto& d : opened) {
    if (d->name() == info->name) device = d;
  }
  if (device == nullptr) {
    return absl::InternalError(
        absl::StrCat("RDMA device ", info->name, " was not opened"));
  }
  options.device = info->name;
  options.qp.port = port;
  options.qp.gid_index = gid_index;
  if (options.qps_per_peer == 0) options.qps_per_peer = 4;
  spdlog::info("verbs transport: device {} port {} GID index {} ({}), {} QPs "
               "per peer",
               info->name, port, gid_index,
               [&] {
                 for (const auto& g : info->ports[port - 1].gids) {
                   if (g.index == gid_index) return g.type;
                 }
                 return std::string("default");
               }(),
               options.qps_per_peer);
  return std::shared_ptr<VerbsFabric>(
      new VerbsFabric(std::move(device), std::move(options)));
}

absl::StatusOr<std::vector<std::unique_ptr<QueuePair>>> VerbsFabric::CreateQps(
    uint32_t count, std::shared_ptr<CompletionQueue>* cq) const {
  // Every WR completes at most once, so a CQ as deep as all send queues
  // together can never overrun.
  const int entries = static_cast<int>(std::min<uint64_t>(
      uint64_t{count} * (options_.qp.max_send_wr + options_.qp.max_recv_wr) + 1,
      static_cast<uint64_t>(device_->attributes().max_cqe)));
  RDMAD_ASSIGN_OR_RETURN(*cq, CompletionQueue::Create(device_, entries));
  std::vector<std::unique_ptr<QueuePair>> qps;
  for (uint32_t i = 0; i < count; ++i) {
    RDMAD_ASSIGN_OR_RETURN(auto qp, QueuePair::Create(*cq, options_.qp));
    RDMAD_RETURN_IF_ERROR(qp->ModifyToInit());
    qps.push_back(std::move(qp));
  }
  return qps;
}

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

// The QPs of one Connect between Prepare and the peer's answer.
class PendingPool final : public transport::Connector::Pending {
 public:
  PendingPool(std::shared_ptr<VerbsFabric> fabric, runtime::EventLoop* loop,
              std::string peer, uint64_t generation,
              std::shared_ptr<CompletionQueue> cq,
              std::vector<std::unique_ptr<QueuePair>> qps)
      : fabric_(std::move(fabric)),
        loop_(loop),
        peer_(std::move(peer)),
        generation_(generation),
        cq_(std::move(cq)),
        qps_(std::move(qps)) {}

  absl::StatusOr<std::shared_ptr<transport::DataChannel>> Finish(
      const v1::ConnectResponse& response) override {
    if (static_cast<size_t>(response.qps_size()) != qps_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "peer answered with ", response.qps_size(), " QPs for our ",
          qps_.size()));
    }
    std::vector<uint32_t> remote_qpns;
    std::string remote_device;
    for (size_t i = 0; i < qps_.size(); ++i) {
      const v1::QpEndpoint& wire = response.qps(static_cast<int>(i));
      RDMAD_ASSIGN_OR_RETURN(QpEndpoint remote, FromProto(wire));
      if (i == 0) remote_device = wire.device();
      RDMAD_RETURN_IF_ERROR(qps_[i]->Connect(remote));
      remote_qpns.push_back(remote.qpn);
    }
    VerbsChannelOptions options;
    options.loop = loop_;
    options.peer = peer_;
    options.local_device = fabric_->device()->name();
    options.remote_device = remote_device;
    options.generation = generation_;
    options.chunk_bytes = fabric_->options().chunk_bytes;
    options.read_chunk_bytes = fabric_->options().read_chunk_bytes;
    RDMAD_ASSIGN_OR_RETURN(
        auto channel, VerbsChannel::Create(std::move(options), std::move(cq_),
                                           std::move(qps_),
                                           std::move(remote_qpns)));
    return std::shared_ptr<transport::DataChannel>(std::move(channel));
  }

 private:
  const std::shared_ptr<VerbsFabric> fabric_;
  runtime::EventLoop* const loop_;  // Not owned.
  const std::string peer_;
  const uint64_t generation_;
  std::shared_ptr<CompletionQueue> cq_;
  std::vector<std::unique_ptr<QueuePair>> qps_;
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
  std::shared_ptr<CompletionQueue> cq;
  RDMAD_ASSIGN_OR_RETURN(auto qps,
                         fabric_->CreateQps(fabric_->options().qps_per_peer, &cq));
  for (const auto& qp : qps) {
    RDMAD_ASSIGN_OR_RETURN(QpEndpoint e, qp->LocalEndpoint());
    ToProto(e, fabric_->device()->name(), request->add_qps());
  }
  request->set_transport(v1::TRANSPORT_VERBS);
  return std::unique_ptr<Pending>(std::make_unique<PendingPool>(
      fabric_, runtime_->PickEngine(), peer, request->generation(), std::move(cq),
      std::move(qps)));
}

absl::Status VerbsAcceptor::Accept(const v1::ConnectRequest& request,
                                   const std::string& caller,
                                   v1::ConnectResponse* response) {
  const uint32_t count = static_cast<uint32_t>(request.qps_size());
  if (count == 0 || count > fabric_->options().max_qps_per_connect) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a verbs Connect must carry 1..",
        fabric_->options().max_qps_per_connect, " QP endpoints, got ", count));
  }
  if (request.address().empty()) {
    return absl::InvalidArgumentError(
        "a verbs Connect must name the caller's Peer address");
  }
  std::vector<QpEndpoint> remotes;
  for (const auto& wire : request.qps()) {
    RDMAD_ASSIGN_OR_RETURN(QpEndpoint e, FromProto(wire));
    remotes.push_back(e);
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
  std::shared_ptr<CompletionQueue> cq;
  RDMAD_ASSIGN_OR_RETURN(auto qps, fabric_->CreateQps(count, &cq));
  for (uint32_t i = 0; i < count; ++i) {
    // Our QP goes to RTS now; the caller's reaches RTR after our answer and
    // sends nothing before that, so no packet finds a QP not ready for it.
    RDMAD_RETURN_IF_ERROR(qps[i]->Connect(remotes[i]));
    RDMAD_ASSIGN_OR_RETURN(QpEndpoint e, qps[i]->LocalEndpoint());
    ToProto(e, fabric_->device()->name(), response->add_qps());
    pool.remote_qpns.push_back(remotes[i].qpn);
  }
  // The receives for the caller's notices are posted before it has our
  // answer, so its first notice finds one.
  NoticeReceiverOptions receiver;
  receiver.loop = runtime_->PickServing();
  receiver.peer = request.address();
  receiver.caller = caller;
  receiver.device = fabric_->device()->name();
  receiver.target = notices_;
  RDMAD_ASSIGN_OR_RETURN(
      pool.receiver,
      NoticeReceiver::Start(std::move(receiver), std::move(cq), std::move(qps)));
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
  spdlog::debug("verbs: serving {} QPs for {} (generation {})", count,
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
    const auto& qps = pool.receiver->qps();
    for (size_t i = 0; i < qps.size(); ++i) {
      Served s;
      s.peer = peer;
      transport::ConnectionInfo& c = s.connection;
      c.index = static_cast<uint32_t>(i);
      c.device = fabric_->device()->name();
      c.local_qpn = qps[i]->qpn();
      c.remote_qpn = pool.remote_qpns[i];
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
