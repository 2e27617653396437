// rdmad: the per-node RDMA resource daemon.
//
//   rdmad [--socket PATH] [--peer_listen HOST:PORT] [--data_listen HOST:PORT]
//         [--transport auto|verbs|tcp]
//         [--config FILE] [--log_level LEVEL]
//
// Stops cleanly on SIGTERM or SIGINT.
#include <signal.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "daemon/daemon.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, socket, "",
          "Unix socket for the Local gRPC service (default "
          "/run/rdmad/rdmad.sock); the session socket is this path + "
          "\".session\"");
ABSL_FLAG(std::string, peer_listen, "",
          "HOST:PORT for the Peer gRPC service (default 0.0.0.0:7471; port 0 "
          "picks a free port)");
ABSL_FLAG(std::string, data_listen, "",
          "HOST:PORT for the TCP data listener other daemons send data to "
          "(default: the --peer_listen host with port 0, any free port; "
          "peers learn the port through the Peer service)");
ABSL_FLAG(std::string, advertise_address, "",
          "HOST:PORT peers should use to reach this daemon (default: the "
          "listen address, or the host name for wildcard addresses)");
ABSL_FLAG(std::string, transport, "",
          "data transport: auto (the default: verbs if an RDMA port is "
          "active, else tcp), verbs, or tcp");
ABSL_FLAG(std::string, config, "",
          "text-format rdmad.v1.DaemonConfig file; flags given explicitly "
          "override it");
ABSL_FLAG(std::string, log_level, "",
          "trace, debug, info (the default), warn, error, critical or off");
ABSL_FLAG(std::string, socket_mode, "",
          "file mode of the Unix sockets (octal, default 0666)");

namespace {

// Flags default to empty, meaning "not given": then the config file's value
// (or, failing that, rdmad::ApplyDefaults) is used.
void Override(std::string value, std::string* field) {
  if (!value.empty()) *field = std::move(value);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "rdmad: per-node daemon that owns RDMA resources for local clients.\n"
      "Usage: rdmad [--socket PATH] [--peer_listen HOST:PORT] "
      "[--data_listen HOST:PORT] "
      "[--transport auto|verbs|tcp] [--config FILE] [--log_level LEVEL]");
  absl::ParseCommandLine(argc, argv);

  auto logger = spdlog::stderr_color_mt("rdmad");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ rdmad[%P]: %v");

  rdmad::v1::DaemonConfig config;
  if (const std::string path = absl::GetFlag(FLAGS_config); !path.empty()) {
    auto loaded = rdmad::LoadConfigFile(path);
    if (!loaded.ok()) {
      spdlog::critical("{}", std::string(loaded.status().message()));
      return 2;
    }
    config = *loaded;
  }
  Override(absl::GetFlag(FLAGS_socket), config.mutable_socket());
  Override(absl::GetFlag(FLAGS_peer_listen), config.mutable_peer_listen());
  Override(absl::GetFlag(FLAGS_data_listen), config.mutable_data_listen());
  Override(absl::GetFlag(FLAGS_advertise_address),
           config.mutable_advertise_address());
  Override(absl::GetFlag(FLAGS_transport), config.mutable_transport());
  Override(absl::GetFlag(FLAGS_log_level), config.mutable_log_level());
  Override(absl::GetFlag(FLAGS_socket_mode), config.mutable_socket_mode());
  rdmad::ApplyDefaults(config);

  const auto level = spdlog::level::from_str(config.log_level());
  if (level == spdlog::level::off && config.log_level() != "off") {
    spdlog::critical("--log_level={} is not one of trace, debug, info, warn, "
                     "error, critical, off", config.log_level());
    return 2;
  }
  spdlog::set_level(level);

  // Block the signals we handle before any thread starts, so that every
  // thread inherits the mask and only sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto daemon = rdmad::Daemon::Start(config);
  if (!daemon.ok()) {
    spdlog::critical("cannot start: {}", daemon.status().ToString());
    return 1;
  }
  for (;;) {
    int received = 0;
    if (sigwait(&signals, &received) != 0) continue;
    if (received == SIGHUP) {
      spdlog::info("SIGHUP: configuration reload is not supported yet; "
                   "restart rdmad to apply changes");
      continue;
    }
    spdlog::info("{} received; shutting down", received == SIGTERM ? "SIGTERM"
                                                                    : "SIGINT");
    break;
  }
  (*daemon)->Shutdown();
  return 0;
}
