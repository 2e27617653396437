#include "daemon/peer/grpc_peer_connector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/peer/descriptor_codec.h"
#include "daemon/peer/peer_identity.h"
#include "daemon/peer/transport_kind_proto.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"

namespace rdmad::peer {
namespace {

// One outstanding Peer-service call: its context, request and response,
// and the stub of its channel, which must outlive it.
template <typename Request, typename Response>
struct Call {
  grpc::ClientContext context;
  Request request;
  Response response;
  std::shared_ptr<v1::Peer::Stub> stub;
};

// Ends a call from its callback, as the callback's last act: the caller's
// callback goes first, then the call, then the tracker's reference, which
// is the last. So when Shutdown returns nothing of the call is left for
// gRPC's thread to destroy once the callback returns, and the connector's
// own stubs hold the last reference to each channel. (A gRPC 1.51 channel
// whose last reference goes on that thread can take gRPC's callback
// completion queue with it while the thread still polls the queue: the
// process aborts in grpc_cq_internal_unref.)
template <typename CallT, typename Done>
void EndCall(CallTracker& calls, std::shared_ptr<CallT>& call,
             std::shared_ptr<Done>& done) {
  done.reset();
  grpc::ClientContext* context = &call->context;
  call.reset();
  calls.Untrack(context);
}

absl::Status ShuttingDown() {
  return absl::UnavailableError("this daemon is shutting down");
}

}  // namespace

absl::Status FromPeerCall(const grpc::Status& status, const std::string& peer,
                          absl::string_view call) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return absl::OkStatus();
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::UnavailableError(
          absl::StrCat("peer ", peer, " is unreachable: ", call,
                       " failed: ", status.error_message(),
                       ". Check the address (HOST:PORT of that daemon's Peer "
                       "service, its --peer_listen or --advertise_address) "
                       "and that rdmad runs there"));
    case grpc::StatusCode::CANCELLED:
      return absl::UnavailableError(
          absl::StrCat("peer ", peer, ": ", call, " was cancelled (",
                       status.error_message(), ")"));
    default:
      return absl::Status(
          static_cast<absl::StatusCode>(status.error_code()),
          absl::StrCat("peer ", peer, " answered ", call, " with an error: ",
                       status.error_message()));
  }
}

GrpcPeerConnector::GrpcPeerConnector(
    GrpcPeerConnectorOptions options,
    std::vector<std::unique_ptr<transport::Connector>> connectors)
    : options_(std::move(options)), connectors_(std::move(connectors)) {
  {
    absl::MutexLock lock(&sender_target_->mu);
    sender_target_->connector = this;
  }
  // Channels may outlive this connector: theirs reach it through the
  // target, which Shutdown clears.
  for (const auto& c : connectors_) {
    c->UseSender([target = sender_target_](const std::string& peer,
                                           v1::ConnectRequest request,
                                           transport::ConnectDone done) {
      absl::MutexLock lock(&target->mu);
      if (target->connector == nullptr) return done(ShuttingDown());
      target->connector->SendConnect(peer, std::move(request),
                                     std::move(done));
    });
  }
}

GrpcPeerConnector::~GrpcPeerConnector() { Shutdown(); }

void GrpcPeerConnector::Shutdown() {
  {
    absl::MutexLock lock(&sender_target_->mu);
    sender_target_->connector = nullptr;
  }
  calls_.Shutdown();
}

void GrpcPeerConnector::SetSelfAddress(std::string address) {
  absl::MutexLock lock(&mu_);
  self_address_ = std::move(address);
}

std::string GrpcPeerConnector::self_address() const {
  absl::MutexLock lock(&mu_);
  return self_address_;
}

transport::Connector* GrpcPeerConnector::FindConnector(
    core::TransportKind kind) const {
  for (const auto& c : connectors_) {
    if (c->kind() == kind) return c.get();
  }
  return nullptr;
}

bool GrpcPeerConnector::CanUse(core::TransportKind kind,
                               std::string* why) const {
  transport::Connector* connector = FindConnector(kind);
  if (connector == nullptr) {
    if (why != nullptr) {
      *why = absl::StrCat("this daemon has no ",
                          core::TransportKindName(kind), " data channel");
    }
    return false;
  }
  return connector->Usable(why);
}

std::shared_ptr<v1::Peer::Stub> GrpcPeerConnector::StubFor(
    const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<v1::Peer::Stub>& stub = stubs_[address];
  if (stub == nullptr) {
    // Short reconnect backoffs, so that a restarted peer is found again
    // quickly. Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes it as
    // the least time a connection attempt gets (20 s by default); at
    // 100 ms, a handshake on a busy host never finished ("connection
    // attempt timed out before receiving SETTINGS frame").
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS,
                static_cast<int>(std::max<int64_t>(
                    1000, absl::ToInt64Milliseconds(options_.idle_timeout))));
    stub = v1::Peer::NewStub(grpc::CreateCustomChannel(
        address,
        options_.channel_credentials != nullptr
            ? options_.channel_credentials
            : grpc::InsecureChannelCredentials(),
        args));
  }
  return stub;
}

void GrpcPeerConnector::Forget(const std::string& address) {
  std::shared_ptr<v1::Peer::Stub> dropped;
  absl::MutexLock lock(&mu_);
  auto it = stubs_.find(address);
  if (it == stubs_.end()) return;
  // A new gRPC channel next time: the old one may sit in its reconnect
  // backoff for a while after the peer came back. Calls in flight keep
  // the old stub alive until they end.
  dropped = std::move(it->second);
  stubs_.erase(it);
}

namespace {

// An OpStatus from another daemon as a status: its code, when it is one.
absl::Status FromOpStatus(const v1::OpStatus& status, absl::string_view what) {
  const int code = status.code();
  return absl::Status(code > 0 && code <= 16
                          ? static_cast<absl::StatusCode>(code)
                          : absl::StatusCode::kUnknown,
                      absl::StrCat(what, status.message()));
}

// Another daemon's descriptor is untrusted input: complete, or INTERNAL.
absl::StatusOr<core::RemoteRegionInfo> CheckedRegion(
    const v1::RegionDescriptor& d, const std::string& address,
    const std::string& name) {
  if (d.region_id() == 0 || d.length() == 0 || d.incarnation() == 0) {
    return absl::InternalError(absl::StrCat(
        "peer ", address, " resolved '", name,
        "' to an incomplete descriptor: is it a compatible rdmad?"));
  }
  core::RemoteRegionInfo info = RegionInfoFromProto(d);
  info.peer = address;  // what we reached, whatever it claims
  return info;
}

// One Hello in flight, with the half-made channels of its proposals
// (verbs: QPs in INIT) waiting for the answer.
struct HelloCall : Call<v1::HelloRequest, v1::HelloResponse> {
  struct Proposal {
    core::TransportKind kind = core::TransportKind::kNone;
    std::unique_ptr<transport::Connector::Pending> pending;
  };
  std::vector<Proposal> proposals;
  std::vector<NameRequest> names;
  uint64_t generation = 0;
};

// The peer's answer to `call`, checked: it is untrusted input.
absl::StatusOr<HelloReply> ReadHello(const std::string& address,
                                     HelloCall& call) {
  const v1::HelloResponse& r = call.response;
  HelloReply reply;
  reply.incarnation = r.incarnation();
  reply.identity = PeerIdentityOf(call.context);
  for (int kind : r.transports()) {
    if (FromProto(kind) != core::TransportKind::kNone) {
      reply.transports.push_back(FromProto(kind));
    }
  }
  if (reply.incarnation == 0) {
    return absl::UnavailableError(absl::StrCat(
        "peer ", address, " answered Hello without an incarnation"));
  }
  if (r.has_connect()) {
    const core::TransportKind kind = FromProto(r.connect_transport());
    HelloCall::Proposal* accepted = nullptr;
    for (auto& p : call.proposals) {
      if (p.kind == kind && p.pending != nullptr) accepted = &p;
    }
    if (accepted == nullptr) {
      reply.connect_status = absl::UnavailableError(absl::StrCat(
          "peer ", address, " accepted a data channel it was not offered"));
    } else if (r.connect().incarnation() != reply.incarnation ||
               r.connect().generation() != call.generation) {
      reply.connect_status = absl::UnavailableError(
          absl::StrCat("peer ", address, " answered for another handshake"));
    } else if (auto channel = accepted->pending->Finish(r.connect());
               !channel.ok()) {
      reply.connect_status = absl::UnavailableError(
          absl::StrCat("peer ", address, ": cannot set up the ",
                       core::TransportKindName(kind),
                       " data channel: ", channel.status().message()));
    } else {
      reply.channel = *std::move(channel);
      reply.channel_kind = kind;
    }
  } else if (r.has_connect_error() && r.connect_error().code() != 0) {
    reply.connect_status = FromOpStatus(
        r.connect_error(),
        absl::StrCat("peer ", address,
                     " could not accept the proposed data channel: "));
  }
  const size_t answered =
      std::min(call.names.size(), static_cast<size_t>(r.resolved_size()));
  for (size_t i = 0; i < answered; ++i) {
    const v1::ResolveResult& result = r.resolved(static_cast<int>(i));
    ResolvedName& name = reply.names.emplace_back();
    name.request = call.names[i];
    if (result.status().code() != 0) {
      name.region = FromOpStatus(
          result.status(),
          absl::StrCat("peer ", address, " answered Resolve with an error: "));
    } else {
      name.region = CheckedRegion(result.region(), address, name.request.name);
    }
  }
  return reply;
}

}  // namespace

void GrpcPeerConnector::Hello(const std::string& address, Handshake handshake,
                              Callback<HelloReply> done) {
  auto call = std::make_shared<HelloCall>();
  call->context.set_deadline(absl::ToChronoTime(
      std::min(handshake.deadline, absl::Now() + options_.rpc_timeout)));
  call->request.set_version(options_.version);
  call->request.set_incarnation(options_.incarnation);
  call->request.set_address(self_address());
  for (core::TransportKind kind : options_.offered) {
    call->request.add_transports(ToProto(kind));
  }
  for (const auto& e : options_.endpoints) *call->request.add_endpoints() = e;
  if (!handshake.propose.empty()) {
    absl::MutexLock lock(&mu_);
    call->generation = ++generation_;
  }
  for (core::TransportKind kind : handshake.propose) {
    transport::Connector* connector = FindConnector(kind);
    if (connector == nullptr) continue;
    v1::ConnectRequest* proposal = call->request.add_connect();
    proposal->set_generation(call->generation);
    proposal->set_incarnation(options_.incarnation);
    proposal->set_transport(ToProto(kind));
    // Before Prepare, as in Connect: the TCP channel names this daemon by
    // it to the listener (its notifications' writer).
    proposal->set_address(self_address());
    auto pending = connector->Prepare(address, proposal);
    if (!pending.ok()) {
      // Proposed no more; Connect after the Hello reports the error.
      call->request.mutable_connect()->RemoveLast();
      continue;
    }
    call->proposals.push_back({kind, *std::move(pending)});
  }
  handshake.names.resize(std::min(handshake.names.size(), kMaxHelloNames));
  for (const NameRequest& name : handshake.names) {
    v1::ResolveRequest* resolve = call->request.add_resolve();
    resolve->set_name(name.name);
    resolve->set_incarnation(options_.incarnation);
    resolve->set_uid(name.uid);
  }
  call->names = std::move(handshake.names);
  call->stub = StubFor(address);
  if (!calls_.Track(&call->context, call)) return done(ShuttingDown());
  call->stub->async()->Hello(
      &call->context, &call->request, &call->response,
      // gRPC wants a copyable callback: share the move-only one.
      [this, address, call,
       done = std::make_shared<Callback<HelloReply>>(std::move(done))](
          grpc::Status status) mutable {
        (*done)(status.ok() ? ReadHello(address, *call)
                            : FromPeerCall(status, address, "Hello"));
        EndCall(calls_, call, done);
      });
}

void GrpcPeerConnector::Connect(
    const std::string& address, core::TransportKind kind, uint64_t incarnation,
    Callback<std::shared_ptr<transport::DataChannel>> done) {
  transport::Connector* connector = FindConnector(kind);
  if (connector == nullptr) {
    return done(absl::FailedPreconditionError(
        absl::StrCat("this daemon has no ", core::TransportKindName(kind),
                     " data channel")));
  }
  v1::ConnectRequest request;
  {
    absl::MutexLock lock(&mu_);
    request.set_generation(++generation_);
  }
  // Before Prepare: a TCP channel names this daemon to the peer's data
  // listener with it.
  request.set_address(self_address());
  auto pending = connector->Prepare(address, &request);
  if (!pending.ok()) return done(pending.status());
  request.set_target_incarnation(incarnation);
  request.set_transport(ToProto(kind));
  const uint64_t generation = request.generation();
  SendConnect(
      address, std::move(request),
      [address, incarnation, kind, generation,
       pending = *std::move(pending), done = std::move(done)](
          absl::StatusOr<v1::ConnectResponse> response) mutable {
        if (!response.ok()) return done(std::move(response).status());
        if (response->incarnation() != incarnation ||
            response->generation() != generation) {
          return done(absl::UnavailableError(
              absl::StrCat("peer ", address, " restarted while connecting")));
        }
        auto channel = pending->Finish(*response);
        if (!channel.ok()) {
          return done(absl::UnavailableError(absl::StrCat(
              "peer ", address, ": cannot set up the ",
              core::TransportKindName(kind),
              " data channel: ", channel.status().message())));
        }
        spdlog::info("peer {}: {} data channel ready", address,
                     std::string(core::TransportKindName(kind)));
        done(*std::move(channel));
      });
}

void GrpcPeerConnector::SendConnect(const std::string& address,
                                    v1::ConnectRequest request,
                                    transport::ConnectDone done) {
  auto call = std::make_shared<Call<v1::ConnectRequest, v1::ConnectResponse>>();
  call->request = std::move(request);
  call->request.set_incarnation(options_.incarnation);
  call->request.set_address(self_address());
  call->context.set_deadline(
      absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  call->stub = StubFor(address);
  if (!calls_.Track(&call->context, call)) return done(ShuttingDown());
  call->stub->async()->Connect(
      &call->context, &call->request, &call->response,
      [this, address, call,
       done = std::make_shared<transport::ConnectDone>(std::move(done))](
          grpc::Status status) mutable {
        if (status.ok()) {
          (*done)(std::move(call->response));
        } else {
          (*done)(FromPeerCall(status, address, "Connect"));
        }
        EndCall(calls_, call, done);
      });
}

void GrpcPeerConnector::Resolve(const std::string& address,
                                const std::string& name, uint32_t uid,
                                Callback<core::RemoteRegionInfo> done) {
  using ResolveCall = Call<v1::ResolveRequest, v1::ResolveResponse>;
  auto call = std::make_shared<ResolveCall>();
  call->request.set_name(name);
  call->request.set_incarnation(options_.incarnation);
  // The exporter's access list may name uids: assert ours, as the kernel
  // told us (it can only restrict what the peer grants this daemon).
  call->request.set_uid(uid);
  call->context.set_deadline(
      absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  call->stub = StubFor(address);
  if (!calls_.Track(&call->context, call)) return done(ShuttingDown());
  call->stub->async()->Resolve(
      &call->context, &call->request, &call->response,
      [this, address, name, call,
       done = std::make_shared<Callback<core::RemoteRegionInfo>>(
           std::move(done))](grpc::Status status) mutable {
        if (!status.ok()) {
          (*done)(FromPeerCall(status, address, "Resolve"));
        } else {
          (*done)(CheckedRegion(call->response.region(), address, name));
        }
        EndCall(calls_, call, done);
      });
}

}  // namespace rdmad::peer
