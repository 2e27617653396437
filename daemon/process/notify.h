// SystemdNotifier: tells systemd (or anything listening on $NOTIFY_SOCKET)
// how the daemon is doing, with sd_notify(3):
//   READY=1      once both gRPC servers listen (Type=notify units wait for it)
//   RELOADING=1  while SIGHUP re-reads the config file, READY=1 after
//   STATUS=...   a line shown by `systemctl status rdmad`
//   STOPPING=1   when shutdown begins
//   WATCHDOG=1   every half of WatchdogSec=, from a thread of its own, and
//                only while a liveness check passes
// Outside systemd (no $NOTIFY_SOCKET) every call is a cheap no-op, so main()
// calls it unconditionally.
//
// Example:
//   SystemdNotifier notifier;
//   notifier.Ready("serving");
//   notifier.StartWatchdog([&](absl::Duration budget) {
//     return self_check.Run(budget);  // see self_check.h
//   });
//   ...                       // until SIGTERM
//   notifier.Stopping();
//   notifier.StopWatchdog();  // also done by the destructor
//
// Thread-safety: all methods may be called from any thread.
#ifndef RDMAD_DAEMON_PROCESS_NOTIFY_H_
#define RDMAD_DAEMON_PROCESS_NOTIFY_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rdmad::process {

class SystemdNotifier {
 public:
  SystemdNotifier() = default;
  ~SystemdNotifier();  // StopWatchdog()

  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  // READY=1 with a STATUS= line.
  void Ready(const std::string& status);
  // RELOADING=1 with a STATUS= line; follow with Ready().
  void Reloading(const std::string& status);
  // STOPPING=1 with a STATUS= line.
  void Stopping(const std::string& status);
  // STATUS= only.
  void Status(const std::string& status);

  // The keep-alive interval systemd asked for (half of WatchdogSec=, as
  // sd_watchdog_enabled(3) recommends), or zero when no watchdog is wanted
  // for this process ($WATCHDOG_USEC unset, or $WATCHDOG_PID is another
  // process).
  static absl::Duration WatchdogInterval();

  // Checks that the daemon is alive, within the budget it is given (a
  // fraction of the interval). Only an OK result earns a WATCHDOG=1.
  using LivenessCheck = std::function<absl::Status(absl::Duration budget)>;

  // Starts the thread that, every WatchdogInterval(), runs `alive` (if
  // given) and sends WATCHDOG=1 when it passes. Does nothing if the
  // interval is zero or the thread already runs. Returns the interval in
  // use.
  absl::Duration StartWatchdog(LivenessCheck alive = nullptr);
  // Stops and joins the watchdog thread; returns within one wake-up.
  // Idempotent.
  void StopWatchdog();

 private:
  void WatchdogLoop(absl::Duration interval, LivenessCheck alive);

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;  // touched only by Start/StopWatchdog
  absl::Mutex thread_mu_;  // serializes Start/StopWatchdog
};

}  // namespace rdmad::process

#endif  // RDMAD_DAEMON_PROCESS_NOTIFY_H_
