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

// Where rail `rail`'s QPs go in a Connect request or answer: `qps` for the
// first rail, else the rail's entry of `extra_rails` (added as needed).
template <typename Message>
google::protobuf::RepeatedPtrField<v1::QpEndpoint>* RailQps(Message* message,
                                                            size_t rail) {
  if (rail == 0) return message->mutable_qps();
  while (static_cast<size_t>(message->extra_rails_size()) < rail) {
    message->add_extra_rails();
  }
  return message->mutable_extra_rails(static_cast<int>(rail - 1))
      ->mutable_qps();
}

// The QPs the peer answered for rail `rail` (none if it did not answer
// for that rail).
const google::protobuf::RepeatedPtrField<v1::QpEndpoint>& AnsweredQps(
    const v1::ConnectResponse& response, size_t rail) {
  static const auto* const kNone =
      new google::protobuf::RepeatedPtrField<v1::QpEndpoint>();
  if (rail == 0) return response.qps();
  if (static_cast<int>(rail) > response.extra_rails_size()) return *kNone;
  return response.extra_rails(static_cast<int>(rail - 1)).qps();
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
                         ConnectTo(qps, AnsweredQps(*answer, target.rail),
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
        const auto& answer =
            r == 0 ? response.qps() : response.extra_rails(r - 1).qps();
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
    auto* out = r == 0 ? request->mutable_qps()
                       : request->add_extra_rails()->mutable_qps();
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
  receiver.monitor = fabric_->monitor();
  RDMAD_ASSIGN_OR_RETURN(
      auto started,
      NoticeReceiver::Start(std::move(receiver), std::move(cq), std::move(qps)));
  pool->receivers.push_back(std::move(started));
  pool->device = device;
  return absl::OkStatus();
}

absl::Status VerbsAcceptor::AcceptGrow(const v1::ConnectRequest& request,
                                       const std::string& caller,
                                       v1::ConnectResponse* response) {
  const size_t rails = 1 + static_cast<size_t>(request.extra_rails_size());
  const uint32_t most = fabric_->options().max_qps_per_connect;
  const auto stale = [&request] {
    return absl::FailedPreconditionError(absl::StrCat(
        "verbs grow from ", request.address(), " for generation ",
        request.generation(),
        ": no pool of that handshake is served (it was replaced or "
        "dropped); connect again"));
  };
  const auto remotes = [&request](size_t r) -> const auto& {
    return r == 0 ? request.qps() : request.extra_rails(r - 1).qps();
  };
  uint64_t sequence = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = pools_.find(request.address());
    if (it == pools_.end() || it->second.incarnation != request.incarnation() ||
        it->second.generation != request.generation()) {
      return stale();
    }
    const Pool& pool = it->second;
    sequence = pool.sequence;
    for (size_t r = 0; r < rails; ++r) {
      if (remotes(r).empty()) continue;
      if (r >= pool.rails.size() || pool.rails[r].receivers.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "verbs grow from ", request.address(), ": rail ", r,
            " is not served; connect again"));
      }
      const size_t total =
          pool.rails[r].remote_qpns.size() + static_cast<size_t>(remotes(r).size());
      if (total > most) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a verbs pool may have at most ", most, " QPs per rail; growing "
            "rail ", r, " would make it ", total));
      }
    }
  }
  // QPs are made outside the lock (each is several system calls), then
  // added only if the pool is still the one they were made for.
  std::vector<RailPool> added(rails);
  for (size_t r = 0; r < rails; ++r) {
    auto* out = RailQps(response, r);
    if (remotes(r).empty()) continue;
    RDMAD_RETURN_IF_ERROR(
        AcceptRail(r, remotes(r), request, caller, &added[r], out));
  }
  absl::MutexLock lock(&mu_);
  auto it = pools_.find(request.address());
  if (it == pools_.end() || it->second.sequence != sequence) {
    return stale();  // `added` is destroyed with its QPs
  }
  for (size_t r = 0; r < rails; ++r) {
    RailPool& into = it->second.rails[r];
    for (auto& receiver : added[r].receivers) {
      into.receivers.push_back(std::move(receiver));
    }
    into.remote_qpns.insert(into.remote_qpns.end(),
                            added[r].remote_qpns.begin(),
                            added[r].remote_qpns.end());
  }
  spdlog::debug("verbs: grew the pool of {} (generation {})",
                request.address(), request.generation());
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
  if (request.grow()) return AcceptGrow(request, caller, response);
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
      // The receivers' QPs in pool order (none: the rail is not set up).
      size_t index = 0;
      for (const auto& receiver : rail.receivers) {
        for (const auto& qp : receiver->qps()) {
          Served s;
          s.peer = peer;
          transport::ConnectionInfo& c = s.connection;
          c.index = static_cast<uint32_t>(index);
          c.rail = static_cast<uint32_t>(r);
          c.device = rail.device;
          c.local_qpn = qp->qpn();
          c.remote_qpn = index < rail.remote_qpns.size()
                             ? rail.remote_qpns[index]
                             : 0;
          auto state = qp->QueryState();
          c.qp_state = state.ok() ? QpStateName(*state) : "UNKNOWN";
          c.state = state.ok() && *state == IBV_QPS_RTS
                        ? transport::ConnectionState::kReady
                        : transport::ConnectionState::kError;
          c.path_mtu = qp->config().path_mtu;
          c.generation = pool.generation;
          out.push_back(std::move(s));
          ++index;
        }
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
