// SelfCheck: what the systemd watchdog vouches for. Before each WATCHDOG=1
// the daemon calls its own Local.GetStatus over its own Unix socket, with a
// deadline. That call needs the gRPC server to accept and run it and the
// core tables (regions, sessions, peers) to hand out their totals, so a
// wedged server or a deadlocked core stops the pings and systemd restarts
// the daemon — a timer thread that pinged unconditionally would keep a hung
// daemon "alive" forever.
//
// Example:
//   SelfCheck check(config.socket());
//   notifier.StartWatchdog([&](absl::Duration budget) {
//     return check.Run(budget);
//   });
//
// Thread-safety: Run may be called from any thread, one call at a time.
#ifndef RDMAD_DAEMON_PROCESS_SELF_CHECK_H_
#define RDMAD_DAEMON_PROCESS_SELF_CHECK_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace rdmad::process {

class SelfCheck {
 public:
  // `local_socket`: the Local gRPC socket of this very daemon.
  explicit SelfCheck(std::string local_socket);
  ~SelfCheck();

  // OK if this process answered GetStatus within `deadline`; otherwise why
  // not (another process answering on the socket counts as a failure).
  absl::Status Run(absl::Duration deadline);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rdmad::process

#endif  // RDMAD_DAEMON_PROCESS_SELF_CHECK_H_
