#include "daemon/process/notify.h"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "spdlog/spdlog.h"

namespace rdmad::process {
namespace {

// sd_notify takes newline-separated assignments: a newline inside the
// status text would start a bogus assignment.
std::string StatusLine(const std::string& status) {
  return absl::StrCat("STATUS=", absl::StrReplaceAll(status, {{"\n", " "}}));
}

void Send(const std::string& message) {
  // unset_environment = 0: rdmad starts no children, and keeping
  // $NOTIFY_SOCKET lets every later call (RELOADING, STOPPING) reach
  // systemd too.
  const int r = ::sd_notify(0, message.c_str());
  if (r < 0) {
    // Not fatal: the service keeps working, only systemd's view is stale.
    spdlog::warn("sd_notify({}) failed: {}", message.substr(0, message.find('\n')),
                 std::strerror(-r));
  }
}

}  // namespace

SystemdNotifier::~SystemdNotifier() { StopWatchdog(); }

void SystemdNotifier::Ready(const std::string& status) {
  Send(absl::StrCat("READY=1\n", StatusLine(status)));
}

void SystemdNotifier::Reloading(const std::string& status) {
  Send(absl::StrCat("RELOADING=1\n", StatusLine(status)));
}

void SystemdNotifier::Stopping(const std::string& status) {
  Send(absl::StrCat("STOPPING=1\n", StatusLine(status)));
}

void SystemdNotifier::Status(const std::string& status) {
  Send(StatusLine(status));
}

absl::Duration SystemdNotifier::WatchdogInterval() {
  uint64_t usec = 0;
  // > 0: a watchdog is expected from this very process (WATCHDOG_PID, when
  // set, is checked against getpid() by libsystemd).
  if (::sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) {
    return absl::ZeroDuration();
  }
  return absl::Microseconds(static_cast<int64_t>(usec / 2));
}

absl::Duration SystemdNotifier::StartWatchdog(LivenessCheck alive) {
  absl::MutexLock thread_lock(&thread_mu_);
  const absl::Duration interval = WatchdogInterval();
  if (interval <= absl::ZeroDuration() || watchdog_.joinable()) {
    return interval;
  }
  {
    absl::MutexLock lock(&mu_);
    stop_ = false;
  }
  watchdog_ = std::thread([this, interval, alive = std::move(alive)] {
    WatchdogLoop(interval, alive);
  });
  spdlog::info("systemd watchdog: keep-alive every {}",
               absl::FormatDuration(interval));
  return interval;
}

void SystemdNotifier::StopWatchdog() {
  absl::MutexLock thread_lock(&thread_mu_);
  if (!watchdog_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  watchdog_.join();
}

void SystemdNotifier::WatchdogLoop(absl::Duration interval,
                                   LivenessCheck alive) {
  // The check gets half the interval (at most 5 s), so that a slow failure
  // still leaves time to ping before systemd's deadline once it passes.
  const absl::Duration budget = std::min(interval / 2, absl::Seconds(5));
  for (;;) {
    // Outside mu_: StopWatchdog must not wait behind a slow check.
    const absl::Status status = alive ? alive(budget) : absl::OkStatus();
    if (status.ok()) {
      Send("WATCHDOG=1");
    } else {
      spdlog::warn("watchdog: liveness check failed, not pinging systemd: {}",
                   status.ToString());
    }
    absl::MutexLock lock(&mu_);
    // Wakes at once when StopWatchdog sets stop_, else after `interval`.
    if (mu_.AwaitWithTimeout(absl::Condition(&stop_), interval)) return;
  }
}

}  // namespace rdmad::process
