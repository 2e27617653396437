#include "daemon/directory/etcd_client.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/region_address.h"
#include "grpcpp/grpcpp.h"

namespace rdmad::directory {
namespace {

constexpr absl::string_view kScheme = "etcd://";

// Our calls carry at most a few thousand records; a listing is paged.
constexpr int kMaxReceiveBytes = 16 << 20;

}  // namespace

bool IsUnreachable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable;
}

EtcdClient::EtcdClient(EtcdOptions options)
    : options_(std::move(options)),
      url_(absl::StrCat(kScheme, absl::StrJoin(options_.endpoints, ","))) {
  absl::MutexLock lock(&mu_);
  channels_.resize(options_.endpoints.size());
}

EtcdClient::~EtcdClient() { Shutdown(); }

std::string EtcdClient::endpoint() const {
  absl::MutexLock lock(&mu_);
  return options_.endpoints.empty() ? "" : options_.endpoints[current_];
}

void EtcdClient::Rotate() {
  absl::MutexLock lock(&mu_);
  if (!options_.endpoints.empty()) {
    current_ = (current_ + 1) % options_.endpoints.size();
  }
}

std::shared_ptr<grpc::Channel> EtcdClient::Channel() {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[current_];
  if (channel == nullptr) {
    grpc::ChannelArguments args;
    // Find a restarted etcd quickly (see the peer table on why not the
    // minimum backoff).
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // Notice an etcd that stopped answering while a watch is open. etcd
    // refuses pings more often than every 5 s (--grpc-keepalive-min-time).
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    args.SetMaxReceiveMessageSize(kMaxReceiveBytes);
    std::shared_ptr<grpc::ChannelCredentials> credentials =
        grpc::InsecureChannelCredentials();
    if (!options_.ca_pem.empty()) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = options_.ca_pem;
      ssl.pem_cert_chain = options_.cert_pem;
      ssl.pem_private_key = options_.key_pem;
      credentials = grpc::SslCredentials(ssl);
    }
    channel = grpc::CreateCustomChannel(options_.endpoints[current_],
                                        credentials, args);
  }
  return channel;
}

bool EtcdClient::Prepare(grpc::ClientContext& context, absl::Time deadline) {
  context.set_deadline(absl::ToChronoTime(deadline));
  absl::MutexLock lock(&mu_);
  if (shut_down_) return false;
  if (!token_.empty()) context.AddMetadata("token", token_);
  calls_.insert(&context);
  return true;
}

void EtcdClient::Release(grpc::ClientContext& context) {
  absl::MutexLock lock(&mu_);
  calls_.erase(&context);
}

absl::Status EtcdClient::FromGrpc(const grpc::Status& status,
                                  absl::string_view call) {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return absl::OkStatus();
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      return absl::UnavailableError(absl::StrCat(
          "cluster directory ", url_, " is unreachable (", endpoint(), ": ",
          call, ": ", status.error_message(), ")"));
    default:
      return absl::Status(
          static_cast<absl::StatusCode>(status.error_code()),
          absl::StrCat("cluster directory ", url_, ": ", call, ": ",
                       status.error_message()));
  }
}

namespace {
absl::Status ShutDownError(const std::string& url) {
  return absl::UnavailableError(
      absl::StrCat("cluster directory ", url, ": this daemon is shutting down"));
}
}  // namespace

absl::Status EtcdClient::Authenticate(absl::Time deadline) {
  if (options_.user.empty()) return absl::OkStatus();
  {
    absl::MutexLock lock(&mu_);
    token_.clear();  // a stale token would make etcd refuse the call
  }
  etcdserverpb::AuthenticateRequest request;
  request.set_name(options_.user);
  request.set_password(options_.password);
  etcdserverpb::AuthenticateResponse response;
  grpc::ClientContext context;
  if (!Prepare(context, deadline)) return ShutDownError(url_);
  auto stub = etcdserverpb::Auth::NewStub(Channel());
  const grpc::Status status = stub->Authenticate(&context, request, &response);
  Release(context);
  if (!status.ok()) {
    return FromGrpc(status, absl::StrCat("authenticate as ", options_.user));
  }
  absl::MutexLock lock(&mu_);
  token_ = response.token();
  return absl::OkStatus();
}

absl::StatusOr<etcdserverpb::LeaseGrantResponse> EtcdClient::LeaseGrant(
    int64_t ttl_seconds, absl::Time deadline) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  etcdserverpb::LeaseGrantResponse response;
  grpc::ClientContext context;
  if (!Prepare(context, deadline)) return ShutDownError(url_);
  auto stub = etcdserverpb::Lease::NewStub(Channel());
  const grpc::Status status = stub->LeaseGrant(&context, request, &response);
  Release(context);
  if (!status.ok()) return FromGrpc(status, "grant lease");
  if (!response.error().empty()) {
    return absl::UnavailableError(absl::StrCat(
        "cluster directory ", url_, ": grant lease: ", response.error()));
  }
  return response;
}

absl::StatusOr<int64_t> EtcdClient::LeaseKeepAlive(int64_t lease,
                                                   absl::Time deadline) {
  // One short stream per keep-alive: each round trip has its own deadline,
  // so a silent etcd is noticed within it, and no thread sits in a Read.
  grpc::ClientContext context;
  if (!Prepare(context, deadline)) return ShutDownError(url_);
  auto stub = etcdserverpb::Lease::NewStub(Channel());
  auto stream = stub->LeaseKeepAlive(&context);
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseKeepAliveResponse response;
  bool answered = false;
  if (stream->Write(request)) {
    answered = stream->Read(&response);
  }
  stream->WritesDone();
  if (answered) {
    // The server ends its side when ours is done; drain to finish cleanly.
    etcdserverpb::LeaseKeepAliveResponse extra;
    while (stream->Read(&extra)) {
    }
  }
  const grpc::Status status = stream->Finish();
  Release(context);
  if (answered) return response.ttl() > 0 ? response.ttl() : 0;
  if (!status.ok()) return FromGrpc(status, "keep the lease alive");
  return absl::UnavailableError(absl::StrCat(
      "cluster directory ", url_, ": keep the lease alive: no answer"));
}

absl::Status EtcdClient::LeaseRevoke(int64_t lease, absl::Time deadline) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseRevokeResponse response;
  grpc::ClientContext context;
  if (!Prepare(context, deadline)) return ShutDownError(url_);
  auto stub = etcdserverpb::Lease::NewStub(Channel());
  const grpc::Status status = stub->LeaseRevoke(&context, request, &response);
  Release(context);
  return FromGrpc(status, "revoke the lease");
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(
    const etcdserverpb::TxnRequest& request, absl::Time deadline) {
  etcdserverpb::TxnResponse response;
  grpc::ClientContext context;
  if (!Prepare(context, deadline)) return ShutDownError(url_);
  auto stub = etcdserverpb::KV::NewStub(Channel());
  const grpc::Status status = stub->Txn(&context, request, &response);
  Release(context);
  if (!status.ok()) return FromGrpc(status, "transaction");
  return response;
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(
    const etcdserverpb::RangeRequest& request, absl::Time deadline) {
  etcdserverpb::RangeResponse response;
  grpc::ClientContext context;
  if (!Prepare(context, deadline)) return ShutDownError(url_);
  auto stub = etcdserverpb::KV::NewStub(Channel());
  const grpc::Status status = stub->Range(&context, request, &response);
  Release(context);
  if (!status.ok()) return FromGrpc(status, "read");
  return response;
}

absl::StatusOr<etcdserverpb::PutResponse> EtcdClient::Put(
    const etcdserverpb::PutRequest& request, absl::Time deadline) {
  etcdserverpb::PutResponse response;
  grpc::ClientContext context;
  if (!Prepare(context, deadline)) return ShutDownError(url_);
  auto stub = etcdserverpb::KV::NewStub(Channel());
  const grpc::Status status = stub->Put(&context, request, &response);
  Release(context);
  if (!status.ok()) return FromGrpc(status, "write");
  return response;
}

void EtcdClient::RangeAsync(
    etcdserverpb::RangeRequest request, absl::Time deadline,
    std::function<void(absl::StatusOr<etcdserverpb::RangeResponse>)> done) {
  struct Call {
    grpc::ClientContext context;
    etcdserverpb::RangeRequest request;
    etcdserverpb::RangeResponse response;
    std::unique_ptr<etcdserverpb::KV::Stub> stub;
    std::function<void(absl::StatusOr<etcdserverpb::RangeResponse>)> done;
  };
  auto call = std::make_shared<Call>();
  call->request = std::move(request);
  call->done = std::move(done);
  if (!Prepare(call->context, deadline)) return call->done(ShutDownError(url_));
  {
    absl::MutexLock lock(&mu_);
    ++async_calls_;
  }
  call->stub = etcdserverpb::KV::NewStub(Channel());
  call->stub->async()->Range(
      &call->context, &call->request, &call->response,
      [this, call](grpc::Status status) {
        Release(call->context);
        if (status.ok()) {
          call->done(std::move(call->response));
        } else {
          call->done(FromGrpc(status, "read"));
        }
        absl::MutexLock lock(&mu_);
        --async_calls_;
      });
}

absl::Status EtcdClient::Watch(
    const etcdserverpb::WatchCreateRequest& create,
    absl::FunctionRef<bool(const etcdserverpb::WatchResponse&)> on_response) {
  grpc::ClientContext context;
  // No deadline: a watch lasts. The channel's keep-alive notices a dead
  // etcd, and Shutdown() cancels it.
  if (!Prepare(context, absl::InfiniteFuture())) return ShutDownError(url_);
  auto stub = etcdserverpb::Watch::NewStub(Channel());
  auto stream = stub->Watch(&context);
  etcdserverpb::WatchRequest request;
  *request.mutable_create_request() = create;
  absl::Status ended = absl::OkStatus();
  if (stream->Write(request)) {
    etcdserverpb::WatchResponse response;
    while (stream->Read(&response)) {
      if (!on_response(response)) {
        context.TryCancel();
        while (stream->Read(&response)) {
        }
        break;
      }
    }
  }
  const grpc::Status status = stream->Finish();
  Release(context);
  if (!status.ok()) ended = FromGrpc(status, "watch");
  return ended;
}

void EtcdClient::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  for (grpc::ClientContext* context : calls_) context->TryCancel();
  mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &async_calls_));
}

}  // namespace rdmad::directory
