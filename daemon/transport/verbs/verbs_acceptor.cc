// VerbsAcceptor: the serving side of a verbs handshake. It brings a
// caller's pool (or the QPs a grow adds to it) to RTS before it answers,
// and keeps what it serves until the caller's next handshake replaces it.
#include "daemon/transport/verbs/verbs_transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/transport/handshake.h"
#include "daemon/transport/verbs/connect_checks.h"
#include "daemon/transport/verbs/connect_rails.h"
#include "daemon/transport/verbs/conversions.h"
#include "spdlog/spdlog.h"

namespace rdmad::verbs {

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
    // The QPs each rail serves now (none: a rail the handshake left out).
    std::vector<size_t> served(pool.rails.size(), 0);
    for (size_t r = 0; r < pool.rails.size(); ++r) {
      if (!pool.rails[r].receivers.empty()) {
        served[r] = pool.rails[r].remote_qpns.size();
      }
    }
    RDMAD_RETURN_IF_ERROR(CheckGrowFits(request, served, most));
  }
  // QPs are made outside the lock (each is several system calls), then
  // added only if the pool is still the one they were made for.
  std::vector<RailPool> added(rails);
  for (size_t r = 0; r < rails; ++r) {
    auto* out = RailQps(response, r);
    const auto& remotes = RailQpsOf(request, r);
    if (remotes.empty()) continue;
    RDMAD_RETURN_IF_ERROR(
        AcceptRail(r, remotes, request, caller, &added[r], out));
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
  RDMAD_RETURN_IF_ERROR(
      CheckConnectRequest(request, fabric_->options().max_qps_per_connect));
  const size_t rails = 1 + static_cast<size_t>(request.extra_rails_size());
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
    const auto& remotes = RailQpsOf(request, r);
    auto* out = RailQps(response, r);
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

std::vector<transport::ConnectAcceptor::NoticeQueue>
VerbsAcceptor::NoticeQueues() const {
  // The map is set in the constructor and only read after; the counts are
  // atomics the serving loops move.
  std::vector<NoticeQueue> out;
  for (const auto& [device, shared] : shared_receives_) {
    out.push_back(NoticeQueue{.device = device,
                              .depth = shared->depth(),
                              .posted = shared->posted(),
                              .reposts = shared->reposts()});
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
