// EtcdClient: the calls rdmad makes to etcd's v3 gRPC API (KV, Lease,
// Watch, Auth), through stubs generated from etcd's own .proto files.
//
// Every call has a deadline; every failure comes back as an absl::Status
// that names the store ("cluster directory etcd://10.0.0.9:2379 is
// unreachable: ..."), UNAVAILABLE for anything that means "could not reach
// it". Several endpoints are tried in turn: Rotate() moves to the next
// after a failure. With a user, the client authenticates and sends the
// token etcd returns on every call; a call etcd refuses because the token
// expired (or the auth store changed) authenticates again and is made once
// more, so a token's TTL (etcd --auth-token-ttl) never shows. Refusals say
// what to fix: a wrong password, no credentials for an etcd that requires
// them, no permission on the prefix.
//
// Example:
//   EtcdOptions options;
//   options.endpoints = {"127.0.0.1:2379"};
//   EtcdClient etcd(options);
//   auto lease = etcd.LeaseGrant(10, absl::Now() + absl::Seconds(5));
//
// Thread-safe. The synchronous calls block their thread up to their
// deadline: call them only from the directory's own threads, never from
// a gRPC or transfer thread (use RangeAsync there).
#ifndef RDMAD_DAEMON_DIRECTORY_ETCD_CLIENT_H_
#define RDMAD_DAEMON_DIRECTORY_ETCD_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace rdmad::directory {

struct EtcdOptions {
  std::vector<std::string> endpoints;  // HOST:PORT, tried in turn
  // TLS when ca_pem is set (PEM text, not paths); cert and key add a
  // client certificate for etcd's --client-cert-auth.
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  // etcd authentication (etcdctl auth enable); empty user: none (with a
  // client certificate, etcd takes its common name as the user).
  std::string user;
  std::string password;
  // The key prefix the caller works under, named in permission errors.
  std::string prefix;
};

class EtcdClient {
 public:
  explicit EtcdClient(EtcdOptions options);
  ~EtcdClient();  // Shutdown()

  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // "etcd://HOST:PORT,..." for messages.
  const std::string& url() const { return url_; }
  std::string endpoint() const;
  // Moves to the next endpoint (after a failure to reach this one).
  void Rotate();

  // Gets a token for options.user; a no-op without one, or when etcd has
  // authentication disabled (then said once in the log).
  absl::Status Authenticate(absl::Time deadline);
  absl::StatusOr<etcdserverpb::LeaseGrantResponse> LeaseGrant(
      int64_t ttl_seconds, absl::Time deadline);
  // One keep-alive round trip: the lease's remaining TTL in seconds, 0 if
  // it has expired (then its keys are gone).
  absl::StatusOr<int64_t> LeaseKeepAlive(int64_t lease, absl::Time deadline);
  absl::Status LeaseRevoke(int64_t lease, absl::Time deadline);
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(
      const etcdserverpb::TxnRequest& request, absl::Time deadline);
  absl::StatusOr<etcdserverpb::RangeResponse> Range(
      const etcdserverpb::RangeRequest& request, absl::Time deadline);
  absl::StatusOr<etcdserverpb::PutResponse> Put(
      const etcdserverpb::PutRequest& request, absl::Time deadline);

  // Range without blocking: `done` runs once, on a gRPC thread (or inline
  // if the client is shut down).
  void RangeAsync(
      etcdserverpb::RangeRequest request, absl::Time deadline,
      std::function<void(absl::StatusOr<etcdserverpb::RangeResponse>)> done);
  // The remaining TTL of `lease` in seconds, without blocking; -1 when etcd
  // no longer has it (expired or revoked). `done` as for RangeAsync.
  void LeaseTimeToLiveAsync(int64_t lease, absl::Time deadline,
                            std::function<void(absl::StatusOr<int64_t>)> done);

  // Opens a watch with `create` and hands every response to `on_response`
  // until it returns false, the stream breaks or Shutdown() cancels it.
  // Blocks; returns why the stream ended.
  absl::Status Watch(
      const etcdserverpb::WatchCreateRequest& create,
      absl::FunctionRef<bool(const etcdserverpb::WatchResponse&)> on_response);

  // Cancels every call in flight (they fail CANCELLED), makes new ones fail
  // at once, and waits for the callbacks of asynchronous ones. Idempotent.
  void Shutdown();

 private:
  template <typename Response>
  using StartCall = std::function<void(grpc::ClientContext*, Response*,
                                       std::function<void(grpc::Status)>)>;

  std::shared_ptr<grpc::Channel> Channel();
  // Prepares `context`: deadline, auth token (unless `with_token` is
  // false), registration for Shutdown. False when shut down (then do not
  // start the call).
  bool Prepare(grpc::ClientContext& context, absl::Time deadline,
               bool with_token = true);
  void Release(grpc::ClientContext& context);
  absl::Status FromGrpc(const grpc::Status& status, absl::string_view call);
  // Whether `status` is etcd refusing the token (expired, or issued before
  // the auth store changed): worth authenticating again.
  bool IsTokenRefused(const grpc::Status& status) const;
  // Runs `call` (a blocking unary call on the context it is given) with a
  // token, authenticating again and repeating it once if etcd refused the
  // token. `what` names it in errors.
  absl::Status Unary(
      absl::string_view what, absl::Time deadline,
      const std::function<grpc::Status(grpc::ClientContext&)>& call);
  // The same without blocking: `start` begins the call; `done` runs once.
  template <typename Response>
  void UnaryAsync(std::string what, absl::Time deadline,
                  StartCall<Response> start,
                  std::function<void(absl::StatusOr<Response>)> done,
                  bool retried = false);
  void AuthenticateAsync(absl::Time deadline,
                         std::function<void(absl::Status)> done);
  // Keeps the token of a successful Authenticate answer, or decides what
  // an unsuccessful one means.
  absl::Status OnAuthenticated(const grpc::Status& status,
                               const etcdserverpb::AuthenticateResponse& reply);

  const EtcdOptions options_;
  const std::string url_;

  mutable absl::Mutex mu_;
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
  std::string token_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
  int async_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool told_auth_disabled_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

// True for a status that means the store could not be reached (as opposed
// to an answer from it).
bool IsUnreachable(const absl::Status& status);

// True for etcd's answer that a lease named in the call no longer exists
// (it expired, or etcd lost its data).
bool IsLeaseNotFound(const absl::Status& status);

}  // namespace rdmad::directory

#endif  // RDMAD_DAEMON_DIRECTORY_ETCD_CLIENT_H_
