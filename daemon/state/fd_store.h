// FdStore: the service manager's file descriptor store, as rdmad uses it
// (sd_notify(3) FDSTORE=1 / FDSTOREREMOVE=1 with FDNAME=, and the stored
// descriptors passed back at the next start through LISTEN_FDS and
// LISTEN_FDNAMES, sd_listen_fds(3)). systemd keeps the store across
// `systemctl restart` and automatic restarts (Restart=), and empties it when
// the unit is stopped; the unit must set FileDescriptorStoreMax=.
//
// The interface lets tests stand in for systemd.
#ifndef RDMAD_DAEMON_STATE_FD_STORE_H_
#define RDMAD_DAEMON_STATE_FD_STORE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/unique_fd.h"

namespace rdmad::state {

// Implementations are thread-safe.
class FdStore {
 public:
  virtual ~FdStore() = default;
  // Hands a duplicate of `fd` to the store under `name` (printable ASCII,
  // no ':', at most 255 characters). The caller keeps `fd`.
  virtual absl::Status Store(const std::string& name, int fd) = 0;
  // Closes the store's copies of every descriptor named `name`.
  virtual absl::Status Remove(const std::string& name) = 0;
};

// The store of the systemd unit this process runs as ($NOTIFY_SOCKET).
class SystemdFdStore final : public FdStore {
 public:
  absl::Status Store(const std::string& name, int fd) override;
  absl::Status Remove(const std::string& name) override;
};

// Whether this process may use a systemd fd store: $NOTIFY_SOCKET is set,
// and $FDSTORE (systemd 254 and later set it to FileDescriptorStoreMax=) is
// not 0. When not, `why` says why.
bool SystemdFdStoreAvailable(std::string* why);

// A descriptor passed at start, with its FDNAME.
struct NamedFd {
  std::string name;
  UniqueFd fd;
};

// Takes the descriptors systemd passed to this process ($LISTEN_FDS and
// $LISTEN_FDNAMES, when $LISTEN_PID is this process) and removes those
// variables from the environment. Empty when there are none. Call once,
// early: the descriptors are numbers 3.. that nothing else may own.
std::vector<NamedFd> TakeListenFds();

}  // namespace rdmad::state

#endif  // RDMAD_DAEMON_STATE_FD_STORE_H_
