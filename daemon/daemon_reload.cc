// Daemon::Reload: applies what a re-read configuration (SIGHUP) may change
// while running, and says for everything else that it needs a restart.
#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/session_wire.h"
#include "daemon/config/config_reload.h"
#include "daemon/daemon_impl.h"
#include "spdlog/spdlog.h"

namespace rdmad {
namespace {

// A config value as the reload log shows it: text-format, or "(unset)".
std::string Shown(const std::string& value) {
  return value.empty() ? "(unset)" : value;
}
}  // namespace

void Daemon::Reload(const v1::DaemonConfig& input) {
  v1::DaemonConfig next = input;
  ApplyDefaults(next);
  v1::DaemonConfig& running = impl_->config;
  const config::ReloadPlan plan = config::PlanReload(running, next);
  if (plan.empty()) {
    spdlog::info("config reload: nothing changed");
    return;
  }
  config::ReloadPlan applied;
  for (const config::FieldChange& change : plan.apply) {
    absl::Status status = absl::OkStatus();
    if (change.field == "log_level") {
      // CheckConfig vetted the name. The line saying so is logged at info:
      // after the change when that makes it more verbose, before otherwise,
      // so that it is seen either way.
      const auto level = spdlog::level::from_str(next.log_level());
      if (level <= spdlog::level::info) spdlog::set_level(level);
      spdlog::info("config reload: log_level changed from {} to {}: "
                   "applied", Shown(change.before), Shown(change.after));
      spdlog::set_level(level);
      applied.apply.push_back(change);
      continue;
    } else if (change.field == "socket_mode") {
      auto mode = config::ParseMode(next.socket_mode());
      status = mode.status();
      for (const std::string& path :
           {next.socket(), session_wire::SessionSocketPath(next.socket())}) {
        if (status.ok() && ::chmod(path.c_str(), *mode) != 0) {
          status = absl::ErrnoToStatus(errno, absl::StrCat("chmod ", path));
        }
      }
    } else if (change.field == "metrics_listen") {
      // The old endpoint stays up until the new one is bound.
      std::unique_ptr<metrics::MetricsServer> server;
      if (config::MetricsEnabled(next)) {
        auto started = metrics::MetricsServer::Start(
            next.metrics_listen(), impl_->metrics->collectable());
        status = started.status();
        if (started.ok()) server = *std::move(started);
      }
      if (status.ok()) {
        impl_->metrics_server = std::move(server);
        impl_->metrics_address.Set(
            impl_->metrics_server ? impl_->metrics_server->address() : "");
        if (impl_->metrics_server) {
          spdlog::info("metrics on http://{}/metrics",
                       impl_->metrics_server->address());
        }
      }
    }
    if (status.ok()) {
      spdlog::info("config reload: {} changed from {} to {}: applied",
                   change.field, Shown(change.before), Shown(change.after));
      applied.apply.push_back(change);
    } else {
      spdlog::error("config reload: {} changed from {} to {} but could "
                    "not be applied ({}); still {}",
                    change.field, Shown(change.before), Shown(change.after),
                    status.ToString(), Shown(change.before));
    }
  }
  for (const config::FieldChange& change : plan.restart) {
    spdlog::warn("config reload: {} changed from {} to {}: needs a "
                 "restart of rdmad to take effect; still {}",
                 change.field, Shown(change.before), Shown(change.after), Shown(change.before));
  }
  running = config::Merge(running, next, applied);
}

}  // namespace rdmad
