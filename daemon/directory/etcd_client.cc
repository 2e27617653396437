#include "daemon/directory/etcd_client.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/region_address.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"

namespace rdmad::directory {
namespace {

constexpr absl::string_view kScheme = "etcd://";

// Our calls carry at most a few thousand records; a listing is paged.
constexpr int kMaxReceiveBytes = 16 << 20;

}  // namespace

bool IsUnreachable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable;
}

bool IsLeaseNotFound(const absl::Status& status) {
  return absl::IsNotFound(status) &&
         absl::StrContains(status.message(), "lease not found");
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

bool EtcdClient::Prepare(grpc::ClientContext& context, absl::Time deadline,
                         bool with_token) {
  context.set_deadline(absl::ToChronoTime(deadline));
  absl::MutexLock lock(&mu_);
  if (shut_down_) return false;
  if (with_token && !token_.empty()) context.AddMetadata("token", token_);
  calls_.insert(&context);
  return true;
}

void EtcdClient::Release(grpc::ClientContext& context) {
  absl::MutexLock lock(&mu_);
  calls_.erase(&context);
}

bool EtcdClient::IsTokenRefused(const grpc::Status& status) const {
  if (options_.user.empty()) return false;  // no token to renew
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) return true;
  // etcdserver: "revision of auth store is old" (a token from before a
  // change to users or roles) and "user name is empty" (no token at all,
  // e.g. the first call raced the first Authenticate).
  return status.error_code() == grpc::StatusCode::INVALID_ARGUMENT &&
         (absl::StrContains(status.error_message(), "auth store is old") ||
          absl::StrContains(status.error_message(), "user name is empty"));
}

absl::Status EtcdClient::FromGrpc(const grpc::Status& status,
                                  absl::string_view call) {
  const std::string& said = status.error_message();
  std::string hint;
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return absl::OkStatus();
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
      return absl::UnavailableError(
          absl::StrCat("cluster directory ", url_, " is unreachable (",
                       endpoint(), ": ", call, ": ", said, ")"));
    case grpc::StatusCode::PERMISSION_DENIED:
      hint = absl::StrCat(
          ": ",
          options_.user.empty()
              ? std::string("the etcd user of this daemon's client "
                            "certificate (its common name)")
              : absl::StrCat("etcd user '", options_.user, "'"),
          " needs read and write permission on the keys under ",
          options_.prefix.empty() ? std::string("the directory prefix")
                                  : absl::StrCat(options_.prefix, "/"),
          " (etcdctl role grant-permission ROLE --prefix=true readwrite ",
          options_.prefix.empty() ? std::string("PREFIX") : options_.prefix,
          "/)");
      break;
    case grpc::StatusCode::UNAUTHENTICATED:
      hint =
          ": etcd refused this daemon's auth token even after it "
          "authenticated anew";
      break;
    default:
      if (absl::StrContains(said, "invalid user ID or password")) {
        hint = absl::StrCat(": check directory_user ('", options_.user,
                            "') and the password in directory_password_file");
      } else if (absl::StrContains(said, "user name is empty")) {
        hint =
            ": etcd has authentication enabled and this daemon has no "
            "credentials for it: set directory_user and "
            "directory_password_file, or directory_tls_cert_file with a "
            "certificate whose common name is an etcd user";
      }
      break;
  }
  return absl::Status(
      static_cast<absl::StatusCode>(status.error_code()),
      absl::StrCat("cluster directory ", url_, ": ", call, ": ", said, hint));
}

namespace {
absl::Status ShutDownError(const std::string& url) {
  return absl::UnavailableError(
      absl::StrCat("cluster directory ", url, ": this daemon is shutting down"));
}
}  // namespace

absl::Status EtcdClient::OnAuthenticated(
    const grpc::Status& status,
    const etcdserverpb::AuthenticateResponse& reply) {
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
      absl::StrContains(status.error_message(), "not enabled")) {
    // Nothing to authenticate to: carry on without a token.
    bool first;
    {
      absl::MutexLock lock(&mu_);
      first = !told_auth_disabled_;
      told_auth_disabled_ = true;
      token_.clear();
    }
    if (first) {
      spdlog::warn(
          "cluster directory {}: directory_user is set, but etcd has "
          "authentication disabled: anyone who reaches etcd can "
          "write this cluster's names (etcdctl auth enable)",
          url_);
    }
    return absl::OkStatus();
  }
  if (!status.ok()) {
    return FromGrpc(status, absl::StrCat("authenticate as ", options_.user));
  }
  absl::MutexLock lock(&mu_);
  token_ = reply.token();
  return absl::OkStatus();
}

absl::Status EtcdClient::Authenticate(absl::Time deadline) {
  if (options_.user.empty()) return absl::OkStatus();
  etcdserverpb::AuthenticateRequest request;
  request.set_name(options_.user);
  request.set_password(options_.password);
  etcdserverpb::AuthenticateResponse response;
  grpc::ClientContext context;
  // Without the old token: etcd refuses any call that carries a stale one.
  if (!Prepare(context, deadline, /*with_token=*/false)) {
    return ShutDownError(url_);
  }
  auto stub = etcdserverpb::Auth::NewStub(Channel());
  const grpc::Status status = stub->Authenticate(&context, request, &response);
  Release(context);
  return OnAuthenticated(status, response);
}

void EtcdClient::AuthenticateAsync(absl::Time deadline,
                                   std::function<void(absl::Status)> done) {
  struct Call {
    grpc::ClientContext context;
    etcdserverpb::AuthenticateRequest request;
    etcdserverpb::AuthenticateResponse response;
    std::unique_ptr<etcdserverpb::Auth::Stub> stub;
  };
  auto call = std::make_shared<Call>();
  call->request.set_name(options_.user);
  call->request.set_password(options_.password);
  if (!Prepare(call->context, deadline, /*with_token=*/false)) {
    return done(ShutDownError(url_));
  }
  {
    absl::MutexLock lock(&mu_);
    ++async_calls_;
  }
  call->stub = etcdserverpb::Auth::NewStub(Channel());
  call->stub->async()->Authenticate(
      &call->context, &call->request, &call->response,
      [this, call, done = std::move(done)](grpc::Status status) mutable {
        Release(call->context);
        done(OnAuthenticated(status, call->response));
        // What this callback holds goes before Shutdown can return (see
        // UnaryAsync).
        call.reset();
        done = nullptr;
        absl::MutexLock lock(&mu_);
        --async_calls_;
      });
}

absl::Status EtcdClient::Unary(
    absl::string_view what, absl::Time deadline,
    const std::function<grpc::Status(grpc::ClientContext&)>& call) {
  for (int attempt = 0;; ++attempt) {
    grpc::ClientContext context;
    if (!Prepare(context, deadline)) return ShutDownError(url_);
    const grpc::Status status = call(context);
    Release(context);
    if (attempt == 0 && IsTokenRefused(status)) {
      RDMAD_RETURN_IF_ERROR(Authenticate(deadline));
      continue;
    }
    return FromGrpc(status, what);
  }
}

template <typename Response>
void EtcdClient::UnaryAsync(std::string what, absl::Time deadline,
                            StartCall<Response> start,
                            std::function<void(absl::StatusOr<Response>)> done,
                            bool retried) {
  struct Call {
    grpc::ClientContext context;
    Response response;
  };
  auto call = std::make_shared<Call>();
  if (!Prepare(call->context, deadline)) return done(ShutDownError(url_));
  {
    absl::MutexLock lock(&mu_);
    ++async_calls_;
  }
  start(&call->context, &call->response,
        [this, call, what = std::move(what), deadline, start,
         done = std::move(done), retried](grpc::Status status) mutable {
          Release(call->context);
          if (!retried && IsTokenRefused(status)) {
            // Authenticate again, then the same call once more (counted as
            // in flight all along, so that Shutdown waits for it).
            AuthenticateAsync(
                deadline, [this, what, deadline, start,
                           done](absl::Status authenticated) mutable {
                  if (!authenticated.ok()) return done(authenticated);
                  UnaryAsync<Response>(std::move(what), deadline,
                                       std::move(start), std::move(done),
                                       /*retried=*/true);
                });
          } else if (status.ok()) {
            done(std::move(call->response));
          } else {
            done(FromGrpc(status, what));
          }
          // What this callback holds (the call, the stub in `start`) goes
          // before Shutdown can return: left for gRPC's thread to destroy
          // after it, the last reference to a channel can take gRPC's
          // callback queue down under that thread (gRPC 1.51 aborts).
          call.reset();
          start = nullptr;
          done = nullptr;
          absl::MutexLock lock(&mu_);
          --async_calls_;
        });
}

absl::StatusOr<etcdserverpb::LeaseGrantResponse> EtcdClient::LeaseGrant(
    int64_t ttl_seconds, absl::Time deadline) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_seconds);
  etcdserverpb::LeaseGrantResponse response;
  RDMAD_RETURN_IF_ERROR(
      Unary("grant lease", deadline, [&](grpc::ClientContext& context) {
        return etcdserverpb::Lease::NewStub(Channel())->LeaseGrant(
            &context, request, &response);
      }));
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
  return Unary("revoke the lease", deadline, [&](grpc::ClientContext& context) {
    return etcdserverpb::Lease::NewStub(Channel())->LeaseRevoke(
        &context, request, &response);
  });
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(
    const etcdserverpb::TxnRequest& request, absl::Time deadline) {
  etcdserverpb::TxnResponse response;
  RDMAD_RETURN_IF_ERROR(
      Unary("transaction", deadline, [&](grpc::ClientContext& context) {
        return etcdserverpb::KV::NewStub(Channel())->Txn(&context, request,
                                                         &response);
      }));
  return response;
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(
    const etcdserverpb::RangeRequest& request, absl::Time deadline) {
  etcdserverpb::RangeResponse response;
  RDMAD_RETURN_IF_ERROR(
      Unary("read", deadline, [&](grpc::ClientContext& context) {
        return etcdserverpb::KV::NewStub(Channel())->Range(&context, request,
                                                           &response);
      }));
  return response;
}

absl::StatusOr<etcdserverpb::PutResponse> EtcdClient::Put(
    const etcdserverpb::PutRequest& request, absl::Time deadline) {
  etcdserverpb::PutResponse response;
  RDMAD_RETURN_IF_ERROR(
      Unary("write", deadline, [&](grpc::ClientContext& context) {
        return etcdserverpb::KV::NewStub(Channel())->Put(&context, request,
                                                         &response);
      }));
  return response;
}

void EtcdClient::RangeAsync(
    etcdserverpb::RangeRequest request, absl::Time deadline,
    std::function<void(absl::StatusOr<etcdserverpb::RangeResponse>)> done) {
  // Shared by the call and its repetition after a new token.
  std::shared_ptr<etcdserverpb::KV::Stub> stub =
      etcdserverpb::KV::NewStub(Channel());
  auto shared =
      std::make_shared<etcdserverpb::RangeRequest>(std::move(request));
  UnaryAsync<etcdserverpb::RangeResponse>(
      "read", deadline,
      [stub, shared](grpc::ClientContext* context,
                     etcdserverpb::RangeResponse* response,
                     std::function<void(grpc::Status)> finished) {
        stub->async()->Range(context, shared.get(), response,
                             std::move(finished));
      },
      std::move(done));
}

void EtcdClient::LeaseTimeToLiveAsync(
    int64_t lease, absl::Time deadline,
    std::function<void(absl::StatusOr<int64_t>)> done) {
  std::shared_ptr<etcdserverpb::Lease::Stub> stub =
      etcdserverpb::Lease::NewStub(Channel());
  auto request = std::make_shared<etcdserverpb::LeaseTimeToLiveRequest>();
  request->set_id(lease);
  UnaryAsync<etcdserverpb::LeaseTimeToLiveResponse>(
      "look up a lease", deadline,
      [stub, request](grpc::ClientContext* context,
                      etcdserverpb::LeaseTimeToLiveResponse* response,
                      std::function<void(grpc::Status)> finished) {
        stub->async()->LeaseTimeToLive(context, request.get(), response,
                                       std::move(finished));
      },
      [done = std::move(done)](
          absl::StatusOr<etcdserverpb::LeaseTimeToLiveResponse> response) {
        // etcd answers NOT_FOUND ("requested lease not found") for a lease
        // it no longer has; some versions answer a TTL of -1 instead.
        if (!response.ok()) {
          if (absl::IsNotFound(response.status())) return done(-1);
          return done(response.status());
        }
        done(response->ttl() < 0 ? int64_t{-1} : response->ttl());
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
