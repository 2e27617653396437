// Helpers for the TCP transport's unit tests: an in-process region table
// and a blocking raw socket that speaks the frame protocol by hand.
#ifndef RDMAD_TESTS_UNIT_FAKES_TCP_TEST_UTIL_H_
#define RDMAD_TESTS_UNIT_FAKES_TCP_TEST_UTIL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/core/region_table.h"
#include "daemon/runtime/io_runtime.h"
#include "daemon/transport/tcp/wire.h"

namespace rdmad::tcp::testing {

// A region table with no devices, and a caller that may do anything.
struct Regions {
  core::NullRegistrar registrar;
  core::RegionTable table{&registrar, core::RegionLimits{}};
  core::Caller root{1, 0, 0, 1};

  std::shared_ptr<core::Region> Make(const std::string& name, uint64_t size,
                                     core::RemoteAccess access) {
    core::AllocateOptions options;
    options.size = size;
    options.name = name;
    options.daemon_owned = true;
    options.export_access = access;
    auto region = table.Allocate(root, options);
    if (!region.ok()) return nullptr;
    return *region;
  }
};

// The event loops the transport's objects live on, as in the daemon.
inline std::unique_ptr<runtime::IoRuntime> StartRuntime(int threads = 2) {
  auto runtime = runtime::IoRuntime::Start({.threads = threads});
  return runtime.ok() ? *std::move(runtime) : nullptr;
}

// Fills `n` bytes with a pattern that depends on `seed` and the position.
inline void FillPattern(char* p, uint64_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<char>(x);
  }
}

// A blocking client connection that sends and receives raw frames.
class RawConnection {
 public:
  // Connects to 127.0.0.1:port, from `source` (a loopback address such as
  // 127.0.0.2) when given.
  static absl::StatusOr<RawConnection> Connect(uint16_t port,
                                               const char* source = nullptr) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return absl::ErrnoToStatus(errno, "socket");
    if (source != nullptr) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      ::inet_pton(AF_INET, source, &local.sin_addr);
      if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&local),
                 sizeof(local)) != 0) {
        return absl::ErrnoToStatus(errno, "bind");
      }
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return absl::ErrnoToStatus(errno, "connect");
    }
    timeval tv{10, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return RawConnection(std::move(fd));
  }

  absl::Status Send(const std::string& bytes) {
    size_t at = 0;
    while (at < bytes.size()) {
      const ssize_t n = ::send(fd_.get(), bytes.data() + at, bytes.size() - at,
                               MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return absl::ErrnoToStatus(errno, "send");
      }
      at += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  // Reads exactly n bytes; UNAVAILABLE at end of stream.
  absl::StatusOr<std::string> ReadExactly(size_t n) {
    std::string out(n, '\0');
    size_t at = 0;
    while (at < n) {
      const ssize_t r = ::recv(fd_.get(), out.data() + at, n - at, 0);
      if (r < 0) {
        if (errno == EINTR) continue;
        return absl::ErrnoToStatus(errno, "recv");
      }
      if (r == 0) return absl::UnavailableError("connection closed");
      at += static_cast<size_t>(r);
    }
    return out;
  }

  struct Reply {
    FrameHeader header;
    std::string message;
    std::string payload;
    absl::Status status() const {
      return absl::Status(static_cast<absl::StatusCode>(header.status), message);
    }
  };

  absl::StatusOr<Reply> ReadReply() {
    auto head = ReadExactly(kReplyHeaderSize);
    if (!head.ok()) return head.status();
    auto h = DecodeHeader(absl::Span<const uint8_t>(
        reinterpret_cast<const uint8_t*>(head->data()), head->size()));
    if (!h.ok()) return h.status();
    if (!h->has_value()) return absl::InternalError("short header");
    Reply reply;
    reply.header = **h;
    auto message = ReadExactly(reply.header.message_length);
    if (!message.ok()) return message.status();
    reply.message = *message;
    auto payload = ReadExactly(reply.header.payload_length);
    if (!payload.ok()) return payload.status();
    reply.payload = *payload;
    return reply;
  }

  // True when the server closed the connection (reads hit end of stream).
  bool ClosedByPeer() {
    char c;
    const ssize_t r = ::recv(fd_.get(), &c, 1, 0);
    return r == 0 || (r < 0 && errno == ECONNRESET);
  }

  int fd() const { return fd_.get(); }

 private:
  explicit RawConnection(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace rdmad::tcp::testing

#endif  // RDMAD_TESTS_UNIT_FAKES_TCP_TEST_UTIL_H_
