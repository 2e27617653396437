#include "tests/integration/raw_session.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/session_wire.h"

namespace rdmad::testing {

absl::StatusOr<std::unique_ptr<RawSession>> RawSession::Open(
    const std::string& socket, int max_receive) {
  auto session = std::unique_ptr<RawSession>(new RawSession());
  const std::string path = session_wire::SessionSocketPath(socket);
  session->session_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!session->session_) return absl::ErrnoToStatus(errno, "socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError("session socket path too long");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(session->session_.get(), reinterpret_cast<sockaddr*>(&addr),
                sizeof(addr)) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("connect ", path));
  }
  auto hello =
      session_wire::Receive(session->session_.get(), absl::Seconds(30));
  if (!hello.ok()) return hello.status();
  if (hello->type != session_wire::MessageType::kHello) {
    return absl::InternalError("no session greeting");
  }
  session->id_ = hello->a;
  session->token_ = hello->text;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(max_receive);
  args.SetMaxSendMessageSize(-1);  // tests send oversized messages on purpose
  session->stub_ = v1::Local::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("unix:", socket), grpc::InsecureChannelCredentials(), args));
  return session;
}

absl::StatusOr<UniqueFd> RawSession::TakeFd(uint64_t id) {
  auto got = GetFd(id);
  if (!got.ok()) return got.status();
  return std::move(got->fd);
}

absl::StatusOr<RawSession::MappableFd> RawSession::GetFd(uint64_t id) {
  session_wire::Message request;
  request.type = session_wire::MessageType::kGetFd;
  request.a = id;
  return Ask(request);
}

absl::StatusOr<UniqueFd> RawSession::TakeQueueFd(uint64_t queue_id,
                                                 uint64_t which) {
  session_wire::Message request;
  request.type = session_wire::MessageType::kGetQueueFd;
  request.a = queue_id;
  request.b = which;
  auto got = Ask(request);
  if (!got.ok()) return got.status();
  return std::move(got->fd);
}

absl::StatusOr<RawSession::MappableFd> RawSession::Ask(
    const session_wire::Message& request) {
  if (absl::Status s = session_wire::Send(session_.get(), request); !s.ok()) {
    return s;
  }
  auto reply = session_wire::Receive(session_.get(), absl::Seconds(30));
  if (!reply.ok()) return reply.status();
  if (reply->type == session_wire::MessageType::kError) {
    return session_wire::StatusFromError(*reply);
  }
  if (reply->type != session_wire::MessageType::kFd || !reply->fd.valid()) {
    return absl::InternalError("no descriptor in the reply");
  }
  return MappableFd{std::move(reply->fd), reply->text};
}

absl::Status RawSession::AskFd(uint64_t id) {
  session_wire::Message request;
  request.type = session_wire::MessageType::kGetFd;
  request.a = id;
  return session_wire::Send(session_.get(), request);
}

void RawSession::Authorize(grpc::ClientContext* context) const {
  context->AddMetadata(session_wire::kSessionMetadataKey, token_);
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(30));
}

}  // namespace rdmad::testing
