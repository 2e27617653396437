#include "daemon/peer/peer_table.h"

#include <algorithm>
#include <atomic>
#include <list>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/region_address.h"
#include "common/size.h"
#include "daemon/peer/descriptor_codec.h"
#include "grpcpp/grpcpp.h"
#include "rdmad/v1/rdmad.grpc.pb.h"
#include "spdlog/spdlog.h"

namespace rdmad::peer {
namespace {

// How often the housekeeping thread looks at waiters' deadlines while there
// are some, and how long it sleeps otherwise.
constexpr absl::Duration kHousekeepingBusy = absl::Milliseconds(5);
constexpr absl::Duration kHousekeepingIdle = absl::Milliseconds(250);

const char* TransportName(v1::TransportKind kind) {
  switch (kind) {
    case v1::TRANSPORT_VERBS:
      return "verbs";
    case v1::TRANSPORT_TCP:
      return "tcp";
    default:
      return "none";
  }
}

// A failed Peer-service call as a status naming the peer. Failures to reach
// it at all become UNAVAILABLE; answers from it keep their code.
absl::Status FromGrpc(const grpc::Status& status, const std::string& peer,
                      absl::string_view call) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::UnavailableError(absl::StrCat(
          "peer ", peer, " is unreachable: ", call, " failed: ",
          status.error_message()));
    default:
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          absl::StrCat("peer ", peer, ": ",
                                       status.error_message()));
  }
}

bool Offers(const google::protobuf::RepeatedField<int>& transports,
            v1::TransportKind kind) {
  return std::find(transports.begin(), transports.end(), kind) !=
         transports.end();
}

std::string Label(const std::string& name, uint64_t id) {
  return name.empty() ? absl::StrCat("region #", id)
                      : absl::StrCat("region '", name, "'");
}

// Base of the state of one outstanding Peer-service call.
struct Call {
  virtual ~Call() = default;
  grpc::ClientContext context;
};

}  // namespace

// A region as resolved on a peer.
struct PeerTable::Resolved {
  transport::RemoteTarget target;  // offset left 0
  v1::Access access = v1::ACCESS_NONE;
  uint64_t incarnation = 0;
  bool from_cache = false;

  static Resolved From(const v1::RegionDescriptor& d) {
    Resolved r;
    r.target.region_id = d.region_id();
    r.target.region_name = d.name();
    r.target.region_length = d.length();
    r.target.addr = d.addr();
    for (const auto& key : d.keys()) {
      r.target.rkeys.push_back({key.device(), 0, key.rkey()});
    }
    r.target.tcp_key = d.tcp_key();
    r.access = d.access();
    r.incarnation = d.incarnation();
    return r;
  }
};

struct PeerTable::Peer {
  explicit Peer(std::string a) : address(std::move(a)) {}

  enum class State { kNew, kHandshaking, kReady, kError };
  struct ReadyWaiter {
    absl::Time deadline;
    absl::AnyInvocable<void(absl::Status)> done;
  };
  struct NameWaiter {
    absl::Time deadline;
    absl::AnyInvocable<void(absl::StatusOr<Resolved>)> done;
  };

  const std::string address;

  absl::Mutex mu;
  std::shared_ptr<v1::Peer::Stub> stub ABSL_GUARDED_BY(mu);
  bool fresh_stub ABSL_GUARDED_BY(mu) = true;  // make a new one first
  State state ABSL_GUARDED_BY(mu) = State::kNew;
  bool stale ABSL_GUARDED_BY(mu) = false;  // say Hello before next use
  uint64_t incarnation ABSL_GUARDED_BY(mu) = 0;
  uint64_t generation ABSL_GUARDED_BY(mu) = 0;
  v1::TransportKind transport ABSL_GUARDED_BY(mu) = v1::TRANSPORT_UNSPECIFIED;
  std::string transport_reason ABSL_GUARDED_BY(mu);
  std::shared_ptr<transport::DataChannel> channel ABSL_GUARDED_BY(mu);
  std::string last_error ABSL_GUARDED_BY(mu);
  std::list<ReadyWaiter> ready_waiters ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, std::list<NameWaiter>> resolving
      ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, Resolved> names ABSL_GUARDED_BY(mu);

  std::atomic<uint64_t> bytes_written{0};
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> ops_completed{0};
  std::atomic<uint64_t> ops_failed{0};
};

struct PeerTable::Transfer {
  core::TransferRequest request;
  std::shared_ptr<core::Region> local;
  core::TransferDone done;
  absl::Time start;
  std::shared_ptr<Peer> peer;
  std::optional<v1::RegionDescriptor> descriptor;
  v1::TransportKind transport = v1::TRANSPORT_UNSPECIFIED;
  int retries_left = 1;
  bool used_cache = false;
};

PeerTable::PeerTable(PeerTableOptions options,
                     std::vector<std::unique_ptr<transport::Connector>> connectors)
    : options_(std::move(options)), connectors_(std::move(connectors)) {
  housekeeping_ = std::thread([this] { HousekeepingLoop(); });
}

PeerTable::~PeerTable() { Shutdown(); }

void PeerTable::SetSelfAddress(std::string address) {
  absl::MutexLock lock(&mu_);
  self_address_ = std::move(address);
}

transport::Connector* PeerTable::FindConnector(v1::TransportKind kind) const {
  for (const auto& c : connectors_) {
    if (c->kind() == kind) return c.get();
  }
  return nullptr;
}

std::shared_ptr<PeerTable::Peer> PeerTable::GetPeer(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& slot = peers_[address];
  if (slot == nullptr) slot = std::make_shared<Peer>(address);
  return slot;
}

size_t PeerTable::size() const {
  absl::MutexLock lock(&mu_);
  return peers_.size();
}

// ---------------------------------------------------------------------------
// Transfers
// ---------------------------------------------------------------------------

void PeerTable::Submit(const core::TransferRequest& request,
                       std::shared_ptr<core::Region> local,
                       core::TransferDone done) {
  auto t = std::make_shared<Transfer>();
  t->request = request;
  t->local = std::move(local);
  t->done = std::move(done);
  t->start = absl::Now();
  bool draining;
  {
    absl::MutexLock lock(&mu_);
    draining = draining_;
  }
  if (draining) {
    return Finish(t, absl::UnavailableError(
                         "this daemon is shutting down: no new transfers"));
  }
  std::string address = request.peer;
  if (!request.remote_descriptor.empty()) {
    auto descriptor = DecodeDescriptor(request.remote_descriptor);
    if (!descriptor.ok()) return Finish(t, descriptor.status());
    if (!address.empty() && address != descriptor->peer()) {
      return Finish(t, absl::InvalidArgumentError(absl::StrCat(
                           "the descriptor names a region on ",
                           descriptor->peer(), " but the transfer names peer ",
                           address, ": leave the peer empty or make them "
                           "agree")));
    }
    address = descriptor->peer();
    t->descriptor = *std::move(descriptor);
  } else if (request.remote_name.empty()) {
    return Finish(t, absl::InvalidArgumentError("no remote region named"));
  }
  if (absl::Status s = ValidatePeerAddress(address); !s.ok()) {
    return Finish(t, s);
  }
  t->peer = GetPeer(address);
  Begin(std::move(t));
}

void PeerTable::Begin(std::shared_ptr<Transfer> t) {
  if (absl::Now() >= t->request.deadline) {
    return Finish(t, absl::DeadlineExceededError(absl::StrCat(
                         "peer ", t->peer->address,
                         ": the transfer's deadline passed before it could be "
                         "sent")));
  }
  std::shared_ptr<Peer> peer = t->peer;
  EnsureReady(peer, t->request.deadline, [this, t](absl::Status s) mutable {
    // Handshake failures are not retried here: the handshake itself just
    // tried to reach the peer.
    if (!s.ok()) return Finish(t, std::move(s));
    ResolveTarget(std::move(t));
  });
}

void PeerTable::ResolveTarget(std::shared_ptr<Transfer> t) {
  if (t->descriptor.has_value()) {
    uint64_t incarnation;
    {
      absl::MutexLock lock(&t->peer->mu);
      incarnation = t->peer->incarnation;
    }
    const v1::RegionDescriptor& d = *t->descriptor;
    if (d.incarnation() != incarnation) {
      return Finish(t, absl::NotFoundError(absl::StrFormat(
                           "the descriptor of %s was issued by an earlier run "
                           "of peer %s (incarnation %x; it now runs %x): the "
                           "region is gone, get a new descriptor",
                           Label(d.name(), d.region_id()), t->peer->address,
                           d.incarnation(), incarnation)));
    }
    return Send(std::move(t), Resolved::From(d));
  }
  std::shared_ptr<Peer> peer = t->peer;
  const std::string name = t->request.remote_name;
  LookupName(peer, name, t->request.deadline,
             [this, t](absl::StatusOr<Resolved> r) mutable {
               if (!r.ok()) return Failed(std::move(t), r.status());
               t->used_cache = r->from_cache;
               Send(std::move(t), *std::move(r));
             });
}

void PeerTable::Send(std::shared_ptr<Transfer> t, Resolved target) {
  const core::TransferRequest& request = t->request;
  const std::string& peer = t->peer->address;
  const std::string label =
      Label(target.target.region_name, target.target.region_id);
  if (absl::Now() >= request.deadline) {
    return Finish(t, absl::DeadlineExceededError(absl::StrCat(
                         "peer ", peer, ": the transfer's deadline passed "
                         "before it could be sent")));
  }
  if (!RangeInside(target.target.region_length, request.remote_offset,
                   request.length)) {
    return Finish(t, absl::OutOfRangeError(absl::StrCat(
                         "remote range [", request.remote_offset, ", ",
                         request.remote_offset, "+", request.length,
                         ") does not fit in ", label, " on ", peer, " (",
                         target.target.region_length, " bytes)")));
  }
  const bool write = request.op == core::OpType::kWrite;
  const uint32_t access = static_cast<uint32_t>(target.access);
  const uint32_t needed = write ? v1::ACCESS_WRITE : v1::ACCESS_READ;
  if ((access & needed) != needed) {
    const char* how = access == v1::ACCESS_READ    ? "exported read-only"
                      : access == v1::ACCESS_WRITE ? "exported write-only"
                                                   : "not exported";
    return Failed(std::move(t), absl::PermissionDeniedError(absl::StrCat(
                                    label, " on ", peer, " is ", how)));
  }
  std::shared_ptr<transport::DataChannel> channel;
  {
    absl::MutexLock lock(&t->peer->mu);
    channel = t->peer->channel;
    t->transport = t->peer->transport;
  }
  if (channel == nullptr) {
    return Failed(std::move(t),
                  absl::UnavailableError(absl::StrCat(
                      "peer ", peer, ": no data channel (it is being rebuilt)")));
  }
  transport::RemoteOp op;
  op.op = request.op;
  op.local = t->local;
  op.local_addr = t->local->data() + request.local_offset;
  op.length = request.length;
  op.remote = std::move(target.target);
  op.remote.offset = request.remote_offset;
  op.deadline = request.deadline;
  channel->Post(std::move(op), [this, t](absl::Status s) mutable {
    OnSent(std::move(t), std::move(s));
  });
}

void PeerTable::OnSent(std::shared_ptr<Transfer> t, absl::Status status) {
  if (status.ok()) return Finish(t, status);
  if (status.code() == absl::StatusCode::kUnavailable) MarkStale(t->peer, status);
  Failed(std::move(t), std::move(status));
}

void PeerTable::Failed(std::shared_ptr<Transfer> t, absl::Status status) {
  const absl::StatusCode code = status.code();
  const bool key_problem = code == absl::StatusCode::kNotFound ||
                           code == absl::StatusCode::kPermissionDenied;
  if (key_problem && !t->request.remote_name.empty()) {
    // The cached descriptor may be stale (re-exported, freed, recreated).
    absl::MutexLock lock(&t->peer->mu);
    t->peer->names.erase(t->request.remote_name);
  }
  bool draining;
  {
    absl::MutexLock lock(&mu_);
    draining = draining_;
  }
  if (!draining && t->retries_left > 0 && absl::Now() < t->request.deadline) {
    if (code == absl::StatusCode::kUnavailable) {
      // A lost connection or a restarted peer: say Hello again (rebuilding
      // the channel if it restarted) and try once more. One-sided WRITE and
      // READ are idempotent, so repeating a partly done one is safe.
      --t->retries_left;
      spdlog::debug("retrying a transfer to {} after: {}", t->peer->address,
                    status.ToString());
      return Begin(std::move(t));
    }
    if (key_problem && t->used_cache) {
      --t->retries_left;
      t->used_cache = false;
      // Through Begin: a stale rkey also broke the verbs QP that carried
      // it, and the channel must be rebuilt before the retry.
      return Begin(std::move(t));
    }
  }
  Finish(t, std::move(status));
}

void PeerTable::Finish(const std::shared_ptr<Transfer>& t,
                       absl::Status status) {
  core::TransferDone done = std::move(t->done);
  if (!status.ok()) {
    if (t->peer) {
      t->peer->ops_failed++;
      // What `rdmactl peers` shows as LAST ERROR: the last failure with
      // this peer, whichever step it came from.
      absl::MutexLock lock(&t->peer->mu);
      t->peer->last_error =
          absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                       status.message());
    }
    done(std::move(status));
    return;
  }
  core::TransferResult result;
  result.bytes = t->request.length;
  result.transport = TransportName(t->transport);
  result.latency = absl::Now() - t->start;
  if (t->request.op == core::OpType::kWrite) {
    t->peer->bytes_written += result.bytes;
  } else {
    t->peer->bytes_read += result.bytes;
  }
  t->peer->ops_completed++;
  done(std::move(result));
}

void PeerTable::MarkStale(const std::shared_ptr<Peer>& peer,
                          const absl::Status& why) {
  absl::MutexLock lock(&peer->mu);
  peer->stale = true;
  peer->last_error = std::string(why.message());
}

// ---------------------------------------------------------------------------
// Handshake: Hello, transport choice, Connect
// ---------------------------------------------------------------------------

void PeerTable::EnsureReady(const std::shared_ptr<Peer>& peer,
                            absl::Time deadline,
                            absl::AnyInvocable<void(absl::Status)> ready) {
  bool start = false;
  bool now = false;
  {
    absl::MutexLock lock(&peer->mu);
    if (peer->state == Peer::State::kReady && !peer->stale &&
        peer->channel != nullptr && !peer->channel->NeedsReconnect()) {
      now = true;
    } else {
      peer->ready_waiters.push_back({deadline, std::move(ready)});
      if (peer->state != Peer::State::kHandshaking) {
        peer->state = Peer::State::kHandshaking;
        start = true;
      }
    }
  }
  if (now) {
    ready(absl::OkStatus());
    return;
  }
  cv_.Signal();  // there is a deadline to watch now
  if (start) StartHandshake(peer);
}

bool PeerTable::TrackCall(grpc::ClientContext* context,
                          std::shared_ptr<void> owner) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  calls_.emplace(context, std::move(owner));
  return true;
}

void PeerTable::UntrackCall(grpc::ClientContext* context) {
  absl::MutexLock lock(&mu_);
  calls_.erase(context);
}

void PeerTable::StartHandshake(std::shared_ptr<Peer> peer) {
  struct HelloCall : Call {
    v1::HelloRequest request;
    v1::HelloResponse response;
  };
  auto call = std::make_shared<HelloCall>();
  call->context.set_deadline(
      absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  call->request.set_version(options_.version);
  call->request.set_incarnation(options_.incarnation);
  {
    absl::MutexLock lock(&mu_);
    call->request.set_address(self_address_);
  }
  for (v1::TransportKind kind : options_.offered) {
    call->request.add_transports(kind);
  }
  for (const auto& e : options_.endpoints) *call->request.add_endpoints() = e;
  std::shared_ptr<v1::Peer::Stub> stub;
  {
    absl::MutexLock lock(&peer->mu);
    if (peer->stub == nullptr || peer->fresh_stub) {
      // A new gRPC channel after a failure: the old one may sit in its
      // reconnect backoff for a while after the peer came back.
      // Short backoffs, so that a restarted peer is found again quickly.
      // Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes it as the
      // least time a connection attempt gets (MIN_CONNECT_TIMEOUT, 20 s by
      // default); at 100 ms, a handshake on a busy host never finished
      // ("connection attempt timed out before receiving SETTINGS frame").
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
      args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
      peer->stub = v1::Peer::NewStub(grpc::CreateCustomChannel(
          peer->address,
          options_.channel_credentials != nullptr
              ? options_.channel_credentials
              : grpc::InsecureChannelCredentials(),
          args));
      peer->fresh_stub = false;
    }
    stub = peer->stub;
  }
  if (!TrackCall(&call->context, call)) {
    return HandshakeDone(peer, absl::UnavailableError(
                                   "this daemon is shutting down"));
  }
  stub->async()->Hello(
      &call->context, &call->request, &call->response,
      [this, peer, call, stub](grpc::Status status) {
        if (!status.ok()) {
          HandshakeDone(peer, FromGrpc(status, peer->address, "Hello"));
        } else {
          OnHello(peer, call->response);
        }
        UntrackCall(&call->context);
      });
}

void PeerTable::OnHello(std::shared_ptr<Peer> peer,
                        const v1::HelloResponse& response) {
  const uint64_t incarnation = response.incarnation();
  std::shared_ptr<transport::DataChannel> retired;
  bool have_channel;
  std::list<Peer::ReadyWaiter> waiters;
  {
    absl::MutexLock lock(&peer->mu);
    if (peer->incarnation != 0 && peer->incarnation != incarnation) {
      spdlog::info("peer {} restarted (incarnation {:x} -> {:x}): rebuilding "
                   "its data channel", peer->address, peer->incarnation,
                   incarnation);
      retired = std::move(peer->channel);
      peer->channel = nullptr;
      peer->names.clear();
    }
    peer->incarnation = incarnation;
    if (peer->channel != nullptr && peer->channel->NeedsReconnect()) {
      // Same daemon, but the channel cannot recover alone (a verbs QP went
      // to the error state): build a new pool with a new generation.
      spdlog::info("peer {}: rebuilding its {} data channel after an error",
                   peer->address, TransportName(peer->transport));
      retired = std::move(peer->channel);
      peer->channel = nullptr;
    }
    have_channel = peer->channel != nullptr;
    if (have_channel) {
      // Same daemon as before: its channel reconnects by itself.
      peer->state = Peer::State::kReady;
      peer->stale = false;
      waiters.swap(peer->ready_waiters);
    }
  }
  if (retired) Retire(std::move(retired));
  if (have_channel) {
    for (auto& w : waiters) w.done(absl::OkStatus());
    return;
  }
  // Choose the transport from what both sides offer.
  const bool peer_verbs = Offers(response.transports(), v1::TRANSPORT_VERBS);
  const bool peer_tcp = Offers(response.transports(), v1::TRANSPORT_TCP);
  transport::Connector* verbs = FindConnector(v1::TRANSPORT_VERBS);
  std::string why_not;
  const bool verbs_usable = verbs != nullptr && verbs->Usable(&why_not);
  if (verbs == nullptr) {
    why_not = "this daemon has no verbs data channel (not built in yet)";
  }
  v1::TransportKind kind = v1::TRANSPORT_TCP;
  std::string reason;
  if (options_.transport == "verbs") {
    if (!verbs_usable || !peer_verbs) {
      return HandshakeDone(peer, absl::FailedPreconditionError(absl::StrCat(
                                     "--transport=verbs, but ",
                                     !verbs_usable ? why_not
                                                   : absl::StrCat(
                                                         "peer ", peer->address,
                                                         " offers no verbs "
                                                         "transport"),
                                     ": use --transport=auto or tcp")));
    }
    kind = v1::TRANSPORT_VERBS;
    reason = "forced by --transport=verbs";
  } else if (options_.transport == "tcp") {
    reason = "forced by --transport=tcp";
  } else if (verbs_usable && peer_verbs) {
    // Hook for the verbs transport: both sides can use RDMA.
    kind = v1::TRANSPORT_VERBS;
    reason = "both daemons offer verbs";
  } else {
    reason = !peer_verbs ? "the peer offers no verbs transport" : why_not;
  }
  if (kind == v1::TRANSPORT_TCP && !peer_tcp) {
    return HandshakeDone(peer, absl::FailedPreconditionError(absl::StrCat(
                                   "peer ", peer->address,
                                   " offers no transport this daemon can use")));
  }
  {
    absl::MutexLock lock(&peer->mu);
    peer->transport = kind;
    peer->transport_reason = reason;
  }
  StartConnect(std::move(peer), incarnation);
}

void PeerTable::StartConnect(std::shared_ptr<Peer> peer, uint64_t incarnation) {
  struct ConnectCall : Call {
    v1::ConnectRequest request;
    v1::ConnectResponse response;
    std::unique_ptr<transport::Connector::Pending> pending;
  };
  auto call = std::make_shared<ConnectCall>();
  v1::TransportKind kind;
  std::shared_ptr<v1::Peer::Stub> stub;
  {
    absl::MutexLock lock(&peer->mu);
    kind = peer->transport;
    stub = peer->stub;
    call->request.set_generation(++peer->generation);
  }
  transport::Connector* connector = FindConnector(kind);
  if (connector == nullptr) {
    return HandshakeDone(peer, absl::UnimplementedError(absl::StrCat(
                                   "no connector for transport ",
                                   TransportName(kind))));
  }
  auto pending = connector->Prepare(peer->address, &call->request);
  if (!pending.ok()) return HandshakeDone(peer, pending.status());
  call->pending = *std::move(pending);
  call->request.set_incarnation(options_.incarnation);
  call->request.set_target_incarnation(incarnation);
  call->request.set_transport(kind);
  {
    absl::MutexLock lock(&mu_);
    call->request.set_address(self_address_);
  }
  call->context.set_deadline(
      absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  if (!TrackCall(&call->context, call)) {
    return HandshakeDone(peer, absl::UnavailableError(
                                   "this daemon is shutting down"));
  }
  stub->async()->Connect(
      &call->context, &call->request, &call->response,
      [this, peer, call, stub, incarnation, kind](grpc::Status status) {
        if (!status.ok()) {
          HandshakeDone(peer, FromGrpc(status, peer->address, "Connect"));
        } else if (call->response.incarnation() != incarnation ||
                   call->response.generation() != call->request.generation()) {
          HandshakeDone(peer, absl::UnavailableError(absl::StrCat(
                                  "peer ", peer->address,
                                  " restarted while connecting")));
        } else {
          auto channel = call->pending->Finish(call->response);
          if (!channel.ok()) {
            HandshakeDone(peer, absl::UnavailableError(absl::StrCat(
                                    "peer ", peer->address, ": cannot set up "
                                    "the ", TransportName(kind), " data channel: ",
                                    channel.status().message())));
          } else {
            std::shared_ptr<transport::DataChannel> old;
            {
              absl::MutexLock lock(&peer->mu);
              old = std::exchange(peer->channel, *std::move(channel));
            }
            if (old) Retire(std::move(old));
            spdlog::info("peer {}: {} data channel ready", peer->address,
                         TransportName(kind));
            HandshakeDone(peer, absl::OkStatus());
          }
        }
        UntrackCall(&call->context);
      });
}

void PeerTable::HandshakeDone(const std::shared_ptr<Peer>& peer,
                              absl::Status status) {
  std::list<Peer::ReadyWaiter> waiters;
  {
    absl::MutexLock lock(&peer->mu);
    if (status.ok()) {
      // last_error stays: it is the last failure, even after a recovery.
      peer->state = Peer::State::kReady;
      peer->stale = false;
    } else {
      peer->state = Peer::State::kError;
      peer->last_error = std::string(status.message());
      peer->fresh_stub = true;
    }
    waiters.swap(peer->ready_waiters);
  }
  if (!status.ok()) {
    spdlog::warn("{}", std::string(status.message()));
  }
  for (auto& w : waiters) w.done(status);
}

// ---------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------

void PeerTable::LookupName(
    const std::shared_ptr<Peer>& peer, const std::string& name,
    absl::Time deadline,
    absl::AnyInvocable<void(absl::StatusOr<Resolved>)> done) {
  std::shared_ptr<v1::Peer::Stub> stub;
  uint64_t incarnation = 0;
  std::optional<Resolved> cached;
  bool first = false;
  {
    absl::MutexLock lock(&peer->mu);
    auto it = peer->names.find(name);
    if (it != peer->names.end()) {
      cached = it->second;
      cached->from_cache = true;
    } else {
      auto& waiting = peer->resolving[name];
      first = waiting.empty();
      waiting.push_back({deadline, std::move(done)});
      stub = peer->stub;
      incarnation = peer->incarnation;
    }
  }
  if (cached.has_value()) {
    done(*std::move(cached));
    return;
  }
  cv_.Signal();
  if (!first) return;  // a Resolve for this name is already out
  struct ResolveCall : Call {
    v1::ResolveRequest request;
    v1::ResolveResponse response;
  };
  auto call = std::make_shared<ResolveCall>();
  call->request.set_name(name);
  call->request.set_incarnation(options_.incarnation);
  call->context.set_deadline(
      absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  if (stub == nullptr || !TrackCall(&call->context, call)) {
    return OnResolved(peer, name,
                      absl::UnavailableError("this daemon is shutting down"));
  }
  stub->async()->Resolve(
      &call->context, &call->request, &call->response,
      [this, peer, name, call, stub, incarnation](grpc::Status status) {
        if (!status.ok()) {
          absl::Status s = FromGrpc(status, peer->address, "Resolve");
          if (s.code() == absl::StatusCode::kUnavailable) MarkStale(peer, s);
          OnResolved(peer, name, std::move(s));
        } else {
          const v1::RegionDescriptor& d = call->response.region();
          if (d.incarnation() != incarnation) {
            absl::Status s = absl::UnavailableError(absl::StrCat(
                "peer ", peer->address, " restarted since Hello"));
            MarkStale(peer, s);
            OnResolved(peer, name, std::move(s));
          } else if (d.region_id() == 0 || d.length() == 0) {
            OnResolved(peer, name, absl::InternalError(absl::StrCat(
                                       "peer ", peer->address, " resolved '",
                                       name, "' to an empty descriptor")));
          } else {
            OnResolved(peer, name, Resolved::From(d));
          }
        }
        UntrackCall(&call->context);
      });
}

void PeerTable::OnResolved(const std::shared_ptr<Peer>& peer,
                           const std::string& name,
                           absl::StatusOr<Resolved> result) {
  std::list<Peer::NameWaiter> waiters;
  {
    absl::MutexLock lock(&peer->mu);
    if (result.ok()) peer->names[name] = *result;
    auto it = peer->resolving.find(name);
    if (it != peer->resolving.end()) {
      waiters.swap(it->second);
      peer->resolving.erase(it);
    }
  }
  for (auto& w : waiters) w.done(result);
}

// ---------------------------------------------------------------------------
// Housekeeping, inspection, shutdown
// ---------------------------------------------------------------------------

void PeerTable::Retire(std::shared_ptr<transport::DataChannel> channel) {
  // Closing joins the channel's thread; this may run on that very thread
  // (inside one of its callbacks), so the housekeeping thread does it.
  absl::MutexLock lock(&mu_);
  retired_.push_back(std::move(channel));
  cv_.Signal();
}

bool PeerTable::FailExpired(absl::Time now, bool all,
                            const absl::Status& status) {
  std::vector<std::shared_ptr<Peer>> peers;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [address, peer] : peers_) peers.push_back(peer);
  }
  bool waiting = false;
  for (const auto& peer : peers) {
    std::vector<absl::AnyInvocable<void(absl::Status)>> ready;
    std::vector<absl::AnyInvocable<void(absl::StatusOr<Resolved>)>> named;
    {
      absl::MutexLock lock(&peer->mu);
      for (auto it = peer->ready_waiters.begin();
           it != peer->ready_waiters.end();) {
        if (all || it->deadline <= now) {
          ready.push_back(std::move(it->done));
          it = peer->ready_waiters.erase(it);
        } else {
          ++it;
        }
      }
      for (auto& [name, list] : peer->resolving) {
        for (auto it = list.begin(); it != list.end();) {
          if (all || it->deadline <= now) {
            named.push_back(std::move(it->done));
            it = list.erase(it);
          } else {
            ++it;
          }
        }
      }
      // (An emptied list stays until its Resolve answers.)
      waiting |= !peer->ready_waiters.empty();
      for (const auto& [name, list] : peer->resolving) waiting |= !list.empty();
    }
    const absl::Status expired =
        !status.ok() ? status
                     : absl::DeadlineExceededError(absl::StrCat(
                           "peer ", peer->address, " did not answer before "
                           "the transfer's deadline"));
    for (auto& done : ready) done(expired);
    for (auto& done : named) done(expired);
  }
  return waiting;
}

void PeerTable::HousekeepingLoop() {
  bool waiting = false;
  for (;;) {
    std::vector<std::shared_ptr<transport::DataChannel>> retired;
    bool drain_now = false;
    {
      absl::MutexLock lock(&mu_);
      if (!stopping_ && retired_.empty()) {
        cv_.WaitWithTimeout(&mu_, waiting ? kHousekeepingBusy : kHousekeepingIdle);
      }
      if (stopping_) return;
      retired.swap(retired_);
      if (draining_ && absl::Now() >= drain_deadline_) {
        drain_now = true;
        drain_deadline_ = absl::InfiniteFuture();
      }
    }
    for (auto& channel : retired) channel->Close();
    retired.clear();
    if (drain_now) {
      spdlog::info("failing transfers still running at the end of the "
                   "shutdown grace period");
      std::vector<std::shared_ptr<transport::DataChannel>> channels;
      {
        absl::MutexLock lock(&mu_);
        for (const auto& [address, peer] : peers_) {
          absl::MutexLock peer_lock(&peer->mu);
          if (peer->channel) channels.push_back(peer->channel);
        }
      }
      for (auto& channel : channels) channel->Close();
      FailExpired(absl::Now(), true,
                  absl::UnavailableError("this daemon is shutting down"));
    }
    waiting = FailExpired(absl::Now(), false, absl::OkStatus());
  }
}

void PeerTable::Drain(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  drain_deadline_ = std::min(drain_deadline_, deadline);
  cv_.Signal();
}

void PeerTable::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    draining_ = true;
    stopping_ = true;
    cv_.SignalAll();
  }
  if (housekeeping_.joinable()) housekeeping_.join();
  // Cancel what is still out and wait for the callbacks: they use `this`.
  // TryCancel runs outside the lock (a callback it triggers takes it); the
  // copied owners keep the contexts alive meanwhile.
  std::vector<std::pair<grpc::ClientContext*, std::shared_ptr<void>>> calls;
  {
    absl::MutexLock lock(&mu_);
    calls.assign(calls_.begin(), calls_.end());
  }
  for (auto& [context, owner] : calls) context->TryCancel();
  calls.clear();
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](absl::flat_hash_map<grpc::ClientContext*, std::shared_ptr<void>>*
                pending) { return pending->empty(); },
        &calls_));
  }
  const absl::Status closing =
      absl::UnavailableError("this daemon is shutting down");
  FailExpired(absl::InfiniteFuture(), true, closing);
  std::vector<std::shared_ptr<transport::DataChannel>> channels;
  {
    absl::MutexLock lock(&mu_);
    channels.swap(retired_);
    for (const auto& [address, peer] : peers_) {
      absl::MutexLock peer_lock(&peer->mu);
      if (peer->channel) channels.push_back(std::move(peer->channel));
      peer->channel = nullptr;
    }
  }
  for (auto& channel : channels) channel->Close();
  FailExpired(absl::InfiniteFuture(), true, closing);
}

std::vector<PeerSnapshot> PeerTable::ListPeers() const {
  std::vector<std::shared_ptr<Peer>> peers;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [address, peer] : peers_) peers.push_back(peer);
  }
  std::sort(peers.begin(), peers.end(),
            [](const auto& a, const auto& b) { return a->address < b->address; });
  std::vector<PeerSnapshot> out;
  for (const auto& peer : peers) {
    PeerSnapshot s;
    s.address = peer->address;
    std::shared_ptr<transport::DataChannel> channel;
    Peer::State state;
    {
      absl::MutexLock lock(&peer->mu);
      s.incarnation = peer->incarnation;
      s.transport = peer->transport;
      s.transport_reason = peer->transport_reason;
      s.last_error = peer->last_error;
      channel = peer->channel;
      state = peer->state;
    }
    switch (state) {
      case Peer::State::kNew:
        s.state = "NEW";
        break;
      case Peer::State::kHandshaking:
        s.state = "CONNECTING";
        break;
      case Peer::State::kError:
        s.state = "ERROR";
        break;
      case Peer::State::kReady:
        s.state = "READY";
        if (channel) {
          const transport::ChannelInfo info = channel->Describe();
          s.state = info.state;
          if (s.last_error.empty()) s.last_error = info.last_error;
        }
        break;
    }
    s.bytes_written = peer->bytes_written.load();
    s.bytes_read = peer->bytes_read.load();
    s.ops_completed = peer->ops_completed.load();
    s.ops_failed = peer->ops_failed.load();
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<ConnectionSnapshot> PeerTable::ListConnections() const {
  std::vector<std::pair<std::string, std::shared_ptr<transport::DataChannel>>>
      channels;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [address, peer] : peers_) {
      absl::MutexLock peer_lock(&peer->mu);
      if (peer->channel) channels.emplace_back(address, peer->channel);
    }
  }
  std::sort(channels.begin(), channels.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<ConnectionSnapshot> out;
  for (const auto& [address, channel] : channels) {
    for (auto& c : channel->Describe().connections) {
      out.push_back({address, std::move(c)});
    }
  }
  return out;
}

}  // namespace rdmad::peer
