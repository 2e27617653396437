#include "daemon/service/peer_inspector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"

namespace rdmad::service {
namespace {

// Most channels kept; past it the cache starts over (inspection is rare,
// and a channel costs a connection).
constexpr size_t kMaxCachedChannels = 64;

// One outstanding call: everything gRPC needs until the callback.
template <typename Request, typename Response>
struct PeerCall {
  std::shared_ptr<v1::Peer::Stub> stub;  // keeps the channel alive
  grpc::ClientContext context;
  Request request;
  Response response;
};

}  // namespace

std::string PrintableFromPeer(absl::string_view text) {
  constexpr size_t kMax = 1024;
  std::string out;
  out.reserve(std::min(text.size(), kMax));
  for (unsigned char c : text.substr(0, kMax)) {
    // Printable ASCII only: the text ends up on someone's terminal.
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (text.size() > kMax) out += "...";
  return out;
}

absl::Status PeerCallStatus(const std::string& peer,
                            const grpc::Status& status) {
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return absl::OkStatus();
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(absl::StrCat(
          "cannot reach the daemon at ", peer, ": ",
          PrintableFromPeer(status.error_message()),
          ". Check the address (its 'rdmactl status' shows it as peer "
          "address) and that it runs"));
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::UnimplementedError(absl::StrCat(
          "the daemon at ", peer, " does not answer this (",
          PrintableFromPeer(status.error_message()),
          "): it runs an older rdmad"));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(absl::StrCat(
          "the daemon at ", peer, " did not answer in time"));
    default:
      return absl::Status(
          code, absl::StrCat("the daemon at ", peer, " says: ",
                             PrintableFromPeer(status.error_message())));
  }
}

namespace {

// What a finished call answers. Takes the call, which goes first: the
// caller's `done` may end the Local call that asked, and the server may
// then be destroyed; the last reference to a channel must not be left for
// gRPC's thread to drop after that (gRPC 1.51 can take its callback queue
// down under that thread).
template <typename Request, typename Response>
absl::StatusOr<Response> Answer(
    std::shared_ptr<PeerCall<Request, Response>>& call,
    const std::string& peer, const grpc::Status& status) {
  if (!status.ok()) {
    call.reset();
    return PeerCallStatus(peer, status);
  }
  Response response = std::move(call->response);
  call.reset();
  return response;
}

}  // namespace

PeerInspector::PeerInspector(
    std::shared_ptr<grpc::ChannelCredentials> credentials)
    : credentials_(credentials != nullptr ? std::move(credentials)
                                          : grpc::InsecureChannelCredentials()) {}

std::shared_ptr<v1::Peer::Stub> PeerInspector::StubFor(
    const std::string& peer) {
  absl::MutexLock lock(&mu_);
  auto it = stubs_.find(peer);
  if (it != stubs_.end()) return it->second;
  if (stubs_.size() >= kMaxCachedChannels) stubs_.clear();
  grpc::ChannelArguments args;
  // Short reconnect backoff: a peer that was down a moment ago should be
  // asked again at the next command, not seconds later.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<v1::Peer::Stub> stub =
      v1::Peer::NewStub(grpc::CreateCustomChannel(peer, credentials_, args));
  stubs_.emplace(peer, stub);
  return stub;
}

void PeerInspector::ListExports(
    const std::string& peer, const v1::ListExportsRequest& request,
    absl::Time deadline,
    std::function<void(absl::StatusOr<v1::ListExportsResponse>)> done) {
  auto call = std::make_shared<
      PeerCall<v1::ListExportsRequest, v1::ListExportsResponse>>();
  call->stub = StubFor(peer);
  call->request = request;
  call->context.set_deadline(absl::ToChronoTime(deadline));
  call->stub->async()->ListExports(
      &call->context, &call->request, &call->response,
      [call, peer, done = std::move(done)](grpc::Status status) mutable {
        done(Answer(call, peer, status));
      });
}

void PeerInspector::Resolve(
    const std::string& peer, const v1::ResolveRequest& request,
    absl::Time deadline,
    std::function<void(absl::StatusOr<v1::ResolveResponse>)> done) {
  auto call =
      std::make_shared<PeerCall<v1::ResolveRequest, v1::ResolveResponse>>();
  call->stub = StubFor(peer);
  call->request = request;
  call->context.set_deadline(absl::ToChronoTime(deadline));
  call->stub->async()->Resolve(
      &call->context, &call->request, &call->response,
      [call, peer, done = std::move(done)](grpc::Status status) mutable {
        done(Answer(call, peer, status));
      });
}

}  // namespace rdmad::service
