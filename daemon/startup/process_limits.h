// Resource limits of the daemon process.
//
// Every region holds an open descriptor (its memfd), and so does every
// client session: under the usual soft limit of 1024 open files a daemon
// ran out at about a thousand regions ("memfd_create: Too many open
// files"). The hard limit is what the administrator allows (systemd's
// LimitNOFILE=, ulimit -Hn); the daemon raises its soft limit to it.
#ifndef RDMAD_DAEMON_STARTUP_PROCESS_LIMITS_H_
#define RDMAD_DAEMON_STARTUP_PROCESS_LIMITS_H_

#include <cstdint>

namespace rdmad::startup {

struct OpenFilesLimit {
  uint64_t before = 0;  // soft limit found at start
  uint64_t now = 0;     // soft limit in force afterwards (hard limit)
};

// Raises RLIMIT_NOFILE's soft limit to its hard limit.
OpenFilesLimit RaiseOpenFilesLimit();

}  // namespace rdmad::startup

#endif  // RDMAD_DAEMON_STARTUP_PROCESS_LIMITS_H_
