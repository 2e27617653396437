#include "common/session_wire.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace rdmad::session_wire {
namespace {

constexpr uint32_t kMagic = 0x52445343;  // "RDSC"
constexpr uint16_t kVersion = 1;

struct Header {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint64_t a;
  uint64_t b;
  int32_t status_code;
  uint32_t text_length;
};
static_assert(sizeof(Header) == 32, "wire header must not change size");

}  // namespace

std::string SessionSocketPath(absl::string_view local_socket) {
  return absl::StrCat(local_socket, ".session");
}

absl::Status Send(int sock, const Message& message, int fd_to_send) {
  if (message.text.size() > kMaxText) {
    return absl::InvalidArgumentError("session message text too long");
  }
  Header header{kMagic,    kVersion,
                static_cast<uint16_t>(message.type),
                message.a, message.b,
                message.status_code,
                static_cast<uint32_t>(message.text.size())};
  std::vector<char> buffer(sizeof(header) + message.text.size());
  std::memcpy(buffer.data(), &header, sizeof(header));
  std::memcpy(buffer.data() + sizeof(header), message.text.data(),
              message.text.size());

  iovec iov{buffer.data(), buffer.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd_to_send >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &fd_to_send, sizeof(int));
  }
  ssize_t sent;
  do {
    sent = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    return absl::ErrnoToStatus(errno, "sendmsg on the rdmad session socket");
  }
  return absl::OkStatus();
}

absl::StatusOr<Message> Receive(int sock, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int wait_ms = -1;
    if (timeout != absl::InfiniteDuration()) {
      const absl::Duration left = deadline - absl::Now();
      wait_ms = left <= absl::ZeroDuration()
                    ? 0
                    : static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
    }
    pollfd pfd{sock, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return absl::ErrnoToStatus(errno, "poll on session socket");
    if (ready == 0) {
      return absl::DeadlineExceededError(
          "no answer from rdmad on the session socket in time");
    }
    break;
  }

  std::vector<char> buffer(sizeof(Header) + kMaxText);
  iovec iov{buffer.data(), buffer.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  // Room for a few descriptors so that a misbehaving sender's extras are
  // received (and closed) instead of leaking into MSG_CTRUNC limbo.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t got;
  do {
    got = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return absl::ErrnoToStatus(errno, "recvmsg on session socket");

  Message message;
  for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr;
       cmsg = CMSG_NXTHDR(&msg, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) {
      continue;
    }
    const size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
      if (!message.fd.valid()) {
        message.fd.reset(fd);
      } else {
        ::close(fd);  // only one descriptor per message is meaningful
      }
    }
  }
  if (got == 0) {
    return absl::UnavailableError("the session socket was closed by the peer");
  }
  if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    return absl::DataLossError("session message was truncated");
  }
  Header header;
  if (static_cast<size_t>(got) < sizeof(header)) {
    return absl::DataLossError("session message shorter than its header");
  }
  std::memcpy(&header, buffer.data(), sizeof(header));
  if (header.magic != kMagic || header.version != kVersion) {
    return absl::DataLossError(
        "session message has a bad magic or version: client and daemon "
        "versions differ?");
  }
  if (header.text_length != static_cast<size_t>(got) - sizeof(header)) {
    return absl::DataLossError("session message length mismatch");
  }
  message.type = static_cast<MessageType>(header.type);
  message.a = header.a;
  message.b = header.b;
  message.status_code = header.status_code;
  message.text.assign(buffer.data() + sizeof(header), header.text_length);
  return message;
}

Message ErrorMessage(const absl::Status& status) {
  Message message;
  message.type = MessageType::kError;
  message.status_code = static_cast<int32_t>(status.code());
  message.text = std::string(status.message().substr(0, kMaxText));
  return message;
}

absl::Status StatusFromError(const Message& message) {
  if (message.status_code == 0) {
    return absl::InternalError("session error message without a status code");
  }
  return absl::Status(static_cast<absl::StatusCode>(message.status_code),
                      message.text);
}

}  // namespace rdmad::session_wire
