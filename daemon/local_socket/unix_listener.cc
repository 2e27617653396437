#include "daemon/local_socket/unix_listener.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace rdmad::local_socket {
namespace {

absl::StatusOr<sockaddr_un> MakeAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "socket path '", path, "' must be 1..", sizeof(addr.sun_path) - 1,
        " characters long"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

bool SomeoneListens(const sockaddr_un& addr, int type) {
  UniqueFd probe(::socket(AF_UNIX, type | SOCK_CLOEXEC, 0));
  if (!probe) return false;
  return ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr),
                   sizeof(addr)) == 0;
}

}  // namespace

absl::Status ClaimSocketPath(const std::string& path) {
  auto addr = MakeAddress(path);
  if (!addr.ok()) return addr.status();
  const std::filesystem::path parent =
      std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot create directory ", parent.string(), " for socket ", path,
          ": ", ec.message()));
    }
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::ErrnoToStatus(errno, absl::StrCat("stat ", path));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " exists and is not a socket; refusing to replace it"));
  }
  if (SomeoneListens(*addr, SOCK_STREAM) ||
      SomeoneListens(*addr, SOCK_SEQPACKET)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "another process is listening on ", path,
        ": is another rdmad running? Give this one its own --socket"));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, absl::StrCat("removing stale ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> ListenUnix(const std::string& path, int type,
                                    uint32_t mode) {
  auto addr = MakeAddress(path);
  if (!addr.ok()) return addr.status();
  if (absl::Status s = ClaimSocketPath(path); !s.ok()) return s;
  UniqueFd fd(::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return absl::ErrnoToStatus(errno, "socket(AF_UNIX)");
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*addr),
             sizeof(*addr)) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("bind ", path));
  }
  if (::chmod(path.c_str(), mode) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("chmod ", path));
  }
  if (::listen(fd.get(), 128) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("listen ", path));
  }
  return fd;
}

}  // namespace rdmad::local_socket
