// The session socket: a SOCK_SEQPACKET Unix socket beside the Local gRPC
// socket, on which each client opens its session.
//
// Why a second socket: gRPC cannot tell the server who the peer process is,
// and it cannot carry file descriptors. On a socket it accepted itself the
// daemon reads the peer's uid/gid/pid with SO_PEERCRED (the kernel's word,
// not the client's), and passes memfds both ways with SCM_RIGHTS. The
// connection *is* the session: when the client process dies, the kernel
// closes it and the daemon frees the session's buffers at once.
//
// Protocol (one message per datagram, little-endian header, optional text):
//   daemon -> client  kHello      a=session id, text=session token
//   client -> daemon  kGetFd      a=region id
//   daemon -> client  kFd         a=region id, b=mapped size, + SCM_RIGHTS fd,
//                                 text="rw" (map it read-write) or "r" (the
//                                 fd is read-only: map it PROT_READ)
//   client -> daemon  kPassFd     + SCM_RIGHTS memfd
//   daemon -> client  kPassFdAck  a=fd token for RegisterBuffer
//   client -> daemon  kGetQueueFd a=queue id, b=which (0 segment, 1 doorbell,
//                                 2 wake-up)
//   daemon -> client  kFd         a=queue id, b=segment size (0 for the
//                                 eventfds), + SCM_RIGHTS fd
//   daemon -> client  kError      status=absl code, text=message
#ifndef RDMAD_COMMON_SESSION_WIRE_H_
#define RDMAD_COMMON_SESSION_WIRE_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"

namespace rdmad::session_wire {

// gRPC metadata key that carries the session token on Local calls.
inline constexpr char kSessionMetadataKey[] = "rdmad-session";

enum class MessageType : uint16_t {
  kHello = 1,
  kGetFd = 2,
  kFd = 3,
  kPassFd = 4,
  kPassFdAck = 5,
  kError = 6,
  kGetQueueFd = 7,
};

// Longest text a message may carry.
inline constexpr size_t kMaxText = 4096;

struct Message {
  MessageType type = MessageType::kError;
  uint64_t a = 0;
  uint64_t b = 0;
  int32_t status_code = 0;  // absl::StatusCode for kError
  std::string text;
  UniqueFd fd;  // a descriptor that travelled with the message, if any
};

// Path of the session socket that belongs to a Local gRPC socket path.
std::string SessionSocketPath(absl::string_view local_socket);

// Sends one message, with `fd_to_send` attached when >= 0 (not consumed).
absl::Status Send(int sock, const Message& message, int fd_to_send = -1);

// Receives one message, waiting at most `timeout` (InfiniteDuration waits
// forever). Returns UNAVAILABLE when the peer closed the socket,
// DEADLINE_EXCEEDED on timeout, DATA_LOSS for a malformed message.
absl::StatusOr<Message> Receive(int sock, absl::Duration timeout);

// Error message carrying `status`.
Message ErrorMessage(const absl::Status& status);

// Converts a kError message back into the status it carries.
absl::Status StatusFromError(const Message& message);

}  // namespace rdmad::session_wire

#endif  // RDMAD_COMMON_SESSION_WIRE_H_
