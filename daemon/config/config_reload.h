// Which changes of the configuration a running daemon can take on SIGHUP.
//
// Only a few fields can change under a running daemon without breaking
// what clients and peers rely on: the log level, the mode of the Unix
// sockets and the metrics endpoint. Everything else (listen addresses, the
// transport, verbs QP settings, limits, TLS...) is baked into sockets,
// queue pairs and tables at start; a change there is reported as needing a
// restart and otherwise ignored. Fields are compared by reflection, so a
// field added to DaemonConfig later is "restart needed" until someone
// makes it reloadable here on purpose.
#ifndef RDMAD_DAEMON_CONFIG_CONFIG_RELOAD_H_
#define RDMAD_DAEMON_CONFIG_CONFIG_RELOAD_H_

#include <string>
#include <vector>

#include "rdmad/v1/config.pb.h"

namespace rdmad::config {

struct FieldChange {
  std::string field;   // as named in the config file
  std::string before;  // text-format value, "" when unset
  std::string after;
};

struct ReloadPlan {
  std::vector<FieldChange> apply;    // safe to change now
  std::vector<FieldChange> restart;  // take effect only after a restart
  bool empty() const { return apply.empty() && restart.empty(); }
};

// True for the fields a running daemon can change on SIGHUP.
bool IsReloadable(const std::string& field);

// Compares the running config with the newly read one (both after flags
// and defaults were applied) field by field.
ReloadPlan PlanReload(const v1::DaemonConfig& running,
                      const v1::DaemonConfig& next);

// `running` with the reloadable fields of `plan` taken from `next`: the
// config the daemon runs with after a reload.
v1::DaemonConfig Merge(const v1::DaemonConfig& running,
                       const v1::DaemonConfig& next, const ReloadPlan& plan);

}  // namespace rdmad::config

#endif  // RDMAD_DAEMON_CONFIG_CONFIG_RELOAD_H_
