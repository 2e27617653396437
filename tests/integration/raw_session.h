// RawSession: a session with rdmad opened by hand (session socket + raw
// gRPC stub), so tests can send requests the client library would never
// build: bad offsets, foreign tokens, unknown enum values, huge messages.
//
// Example:
//   auto s = RawSession::Open(daemon->socket());
//   grpc::ClientContext ctx;
//   s->Authorize(&ctx);
//   grpc::Status st = s->stub().Write(&ctx, request, &response);
#ifndef RDMAD_TESTS_INTEGRATION_RAW_SESSION_H_
#define RDMAD_TESTS_INTEGRATION_RAW_SESSION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/session_wire.h"
#include "common/unique_fd.h"
#include "grpcpp/grpcpp.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::testing {

class RawSession {
 public:
  // Connects to `socket` + ".session", reads the greeting, and makes a stub
  // for `socket` that accepts replies up to `max_receive` bytes.
  static absl::StatusOr<std::unique_ptr<RawSession>> Open(
      const std::string& socket, int max_receive = 64 << 20);

  // Adds this session's token to `context` (with a 30 s deadline).
  void Authorize(grpc::ClientContext* context) const;
  // Sends `token` instead of this session's own from now on (a token
  // stolen from another process, for tests of token binding).
  void UseToken(std::string token) { token_ = std::move(token); }
  const std::string& token() const { return token_; }
  uint64_t id() const { return id_; }
  v1::Local::Stub& stub() { return *stub_; }
  // Asks for region `id`'s memfd on the session socket (what mapping a
  // region does); the descriptor and the access the daemon says it grants
  // ("rw" or "r") if one arrived.
  struct MappableFd {
    UniqueFd fd;
    std::string access;
  };
  absl::StatusOr<MappableFd> GetFd(uint64_t id);
  // The same, keeping only the descriptor: what a client could do with it.
  absl::StatusOr<UniqueFd> TakeFd(uint64_t id);
  // Descriptor `which` (0 segment, 1 doorbell, 2 wake-up) of a queue.
  absl::StatusOr<UniqueFd> TakeQueueFd(uint64_t queue_id, uint64_t which);
  // Only sends the request for region `id`'s memfd, never reading the
  // answer (a client that hoards descriptors in flight).
  absl::Status AskFd(uint64_t id);
  // Closes the session socket: the daemon ends the session.
  void Close() { session_.reset(); }

 private:
  RawSession() = default;
  // Sends `request` on the session socket; the descriptor of the reply.
  absl::StatusOr<MappableFd> Ask(const session_wire::Message& request);
  UniqueFd session_;
  uint64_t id_ = 0;
  std::string token_;
  std::unique_ptr<v1::Local::Stub> stub_;
};

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_INTEGRATION_RAW_SESSION_H_
