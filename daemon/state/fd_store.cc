#include "daemon/state/fd_store.h"

#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace rdmad::state {
namespace {

absl::Status Notify(const std::string& message, const int* fds, unsigned n) {
  // unset_environment = 0: every later message needs $NOTIFY_SOCKET too.
  const int r = ::sd_pid_notify_with_fds(0, 0, message.c_str(), fds, n);
  if (r < 0) {
    return absl::ErrnoToStatus(
        -r, absl::StrCat("sd_notify to the service manager (",
                         message.substr(0, message.find('\n')), ")"));
  }
  if (r == 0) {
    return absl::FailedPreconditionError(
        "no service manager to notify ($NOTIFY_SOCKET is not set)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SystemdFdStore::Store(const std::string& name, int fd) {
  // FDPOLL=0: a memfd never signals POLLHUP; systemd should not watch it.
  return Notify(absl::StrCat("FDSTORE=1\nFDNAME=", name, "\nFDPOLL=0"), &fd, 1);
}

absl::Status SystemdFdStore::Remove(const std::string& name) {
  return Notify(absl::StrCat("FDSTOREREMOVE=1\nFDNAME=", name), nullptr, 0);
}

bool SystemdFdStoreAvailable(std::string* why) {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  if (socket == nullptr || *socket == '\0') {
    *why = "not running under systemd ($NOTIFY_SOCKET is not set)";
    return false;
  }
  const char* max = std::getenv("FDSTORE");
  if (max != nullptr && std::strcmp(max, "0") == 0) {
    *why = "the unit has no file descriptor store (FileDescriptorStoreMax=0)";
    return false;
  }
  return true;
}

std::vector<NamedFd> TakeListenFds() {
  char** names = nullptr;
  const int n = ::sd_listen_fds_with_names(/*unset_environment=*/1, &names);
  std::vector<NamedFd> fds;
  if (n < 0) {
    spdlog::warn("ignoring the descriptors systemd passed: {}",
                 std::strerror(-n));
    return fds;
  }
  for (int i = 0; i < n; ++i) {
    NamedFd named;
    named.fd.reset(SD_LISTEN_FDS_START + i);
    named.name = names != nullptr && names[i] != nullptr ? names[i] : "";
    fds.push_back(std::move(named));
  }
  if (names != nullptr) {
    for (int i = 0; i < n; ++i) std::free(names[i]);
    std::free(names);
  }
  return fds;
}

}  // namespace rdmad::state
