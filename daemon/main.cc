// rdmad: the per-node RDMA resource daemon.
//
//   rdmad [--socket PATH] [--peer_listen HOST:PORT] [--data_listen HOST:PORT]
//         [--transport auto|verbs|tcp]
//         [--config FILE] [--log_level LEVEL] [--metrics_listen HOST:PORT]
//         [--directory etcd://HOST:PORT[,...]] [--directory_prefix /rdmad]
//         [--directory_lease_ttl SECONDS]
//         [--state_dir DIR]
//
// Stops cleanly on SIGTERM or SIGINT; SIGHUP re-reads the config file.
// `rdmad --check-config FILE` checks a config file and exits (0 valid, 2
// not) without starting anything; systemd's ExecReload runs it first.
// Exit status: 0 after a clean stop; 1 a failure at run time; 2 a wrong
// command line or configuration, a taken port, or a path the daemon may not
// use (systemd does not restart after 2: RestartPreventExitStatus=2).
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/config/config_file.h"
#include "daemon/daemon.h"
#include "daemon/process/notify.h"
#include "daemon/process/self_check.h"
#include "daemon/rdmad_version.h"
#include "daemon/startup/command_line.h"
#include "daemon/startup/log_setup.h"
#include "daemon/startup/port_check.h"
#include "daemon/startup/process_limits.h"
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
ABSL_FLAG(std::string, metrics_listen, "",
          "HOST:PORT of the Prometheus metrics endpoint (http://HOST:PORT/"
          "metrics); off by default, port 0 picks a free port");
ABSL_FLAG(std::string, socket_mode, "",
          "file mode of the Unix sockets (octal, default 0666)");
ABSL_FLAG(std::string, directory, "",
          "cluster directory of exported regions: etcd://HOST:PORT[,HOST:"
          "PORT...] (default: none; see DIRECTORY.md.gz in "
          "/usr/share/doc/rdmad)");
ABSL_FLAG(std::string, directory_prefix, "",
          "key prefix of this cluster in etcd (default /rdmad)");
ABSL_FLAG(uint32_t, directory_lease_ttl, 0,
          "seconds a dead daemon's entries stay in the directory (its etcd "
          "lease TTL; default 10, 2..3600)");
ABSL_FLAG(std::string, check_config, "",
          "check this config file (with the other flags given on top, as a "
          "start would use them) and exit: 0 if it is valid, 2 with every "
          "mistake if not; nothing is started (also --check-config)");
ABSL_FLAG(std::string, state_dir, "",
          "directory on a tmpfs or hugetlbfs where daemon-owned named "
          "regions outlive a restart (default: the systemd fd store under "
          "systemd, else none; see RESTART.md.gz in /usr/share/doc/rdmad)");

namespace {

constexpr int kExitRunFailure = 1;
constexpr int kExitBadSetup = 2;  // command line, config, taken port

constexpr char kUsage[] =
    "rdmad: per-node daemon that owns RDMA resources for local clients.\n"
    "Usage: rdmad [--socket PATH] [--peer_listen HOST:PORT] "
    "[--data_listen HOST:PORT]\n"
    "             [--transport auto|verbs|tcp] [--config FILE] "
    "[--log_level LEVEL]\n"
    "             [--metrics_listen HOST:PORT] [--advertise_address "
    "HOST:PORT]\n"
    "             [--socket_mode MODE] [--directory etcd://HOST:PORT[,...]]\n"
    "             [--directory_prefix PREFIX] [--directory_lease_ttl "
    "SECONDS]\n"
    "             [--state_dir DIR]\n"
    "       rdmad --check-config FILE   (validate a config file and exit)\n"
    "Flags given override the config file (rdmad(8); the config's fields "
    "are\ndocumented in /etc/rdmad/rdmad.conf; the guides are in "
    "/usr/share/doc/rdmad).";

// rdmad's own flags: those defined in this file.
bool IsOwnFlag(const absl::CommandLineFlag& flag) {
  return absl::EndsWith(flag.Filename(), "daemon/main.cc");
}

std::string Help() {
  std::vector<rdmad::startup::FlagHelp> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsOwnFlag(*flag)) {
      flags.push_back({std::string(name), flag->Help()});
    }
  }
  return rdmad::startup::HelpText(kUsage, std::move(flags));
}

// Answers --help and --version, and refuses a wrong command line with exit
// status 2, before absl's parser (which exits 1) sees it. Returns the exit
// status, or -1 to go on.
int CheckArguments(int argc, char** argv) {
  std::vector<std::string> known;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (IsOwnFlag(*flag)) known.emplace_back(name);
  }
  auto action = rdmad::startup::CheckCommandLine(
      std::vector<std::string>(argv + 1, argv + argc),
      [](absl::string_view name) {
        return absl::FindCommandLineFlag(name) != nullptr;
      },
      known);
  if (!action.ok()) {
    std::fprintf(stderr, "rdmad: %s\n",
                 std::string(action.status().message()).c_str());
    return kExitBadSetup;
  }
  switch (*action) {
    case rdmad::startup::CommandLineAction::kHelp:
      std::fputs(Help().c_str(), stdout);
      return 0;
    case rdmad::startup::CommandLineAction::kVersion:
      std::printf("rdmad %s\n", RDMAD_VERSION);
      return 0;
    case rdmad::startup::CommandLineAction::kRun:
      break;
  }
  return -1;
}

// Configuration mistakes, taken ports and paths the daemon may not use (a
// socket directory or state_dir it cannot write): a restart does not fix
// them.
bool IsSetupError(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument ||
         status.code() == absl::StatusCode::kAlreadyExists ||
         status.code() == absl::StatusCode::kPermissionDenied;
}

// Every TCP port the daemon will listen on must be free: a second daemon
// must not start on a taken port (see daemon/startup/port_check.h).
absl::Status CheckPorts(const rdmad::v1::DaemonConfig& config) {
  if (absl::Status s = rdmad::startup::CheckPortFree(
          "peers", "--peer_listen", config.peer_listen());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = rdmad::startup::CheckPortFree(
          "the data transport", "--data_listen", config.data_listen());
      !s.ok()) {
    return s;
  }
  if (rdmad::config::MetricsEnabled(config)) {
    return rdmad::startup::CheckPortFree("metrics", "--metrics_listen",
                                         config.metrics_listen());
  }
  return absl::OkStatus();
}

// Flags default to empty, meaning "not given": then the config file's value
// (or, failing that, rdmad::ApplyDefaults) is used.
void Override(std::string value, std::string* field) {
  if (!value.empty()) *field = std::move(value);
}

// The configuration from the file (if any) with the flags given explicitly
// on top, defaults filled in and every field checked. Run at start and
// again on SIGHUP, so that flags keep overriding a reloaded file.
absl::StatusOr<rdmad::v1::DaemonConfig> BuildConfig() {
  rdmad::v1::DaemonConfig config;
  if (const std::string path = absl::GetFlag(FLAGS_config); !path.empty()) {
    auto loaded = rdmad::config::LoadConfigFile(path);
    if (!loaded.ok()) return loaded.status();
    config = *std::move(loaded);
  }
  Override(absl::GetFlag(FLAGS_socket), config.mutable_socket());
  Override(absl::GetFlag(FLAGS_peer_listen), config.mutable_peer_listen());
  Override(absl::GetFlag(FLAGS_data_listen), config.mutable_data_listen());
  Override(absl::GetFlag(FLAGS_advertise_address),
           config.mutable_advertise_address());
  Override(absl::GetFlag(FLAGS_transport), config.mutable_transport());
  Override(absl::GetFlag(FLAGS_log_level), config.mutable_log_level());
  Override(absl::GetFlag(FLAGS_socket_mode), config.mutable_socket_mode());
  Override(absl::GetFlag(FLAGS_metrics_listen),
           config.mutable_metrics_listen());
  Override(absl::GetFlag(FLAGS_directory), config.mutable_directory());
  Override(absl::GetFlag(FLAGS_directory_prefix),
           config.mutable_directory_prefix());
  if (const uint32_t ttl = absl::GetFlag(FLAGS_directory_lease_ttl); ttl != 0) {
    config.set_directory_lease_ttl_seconds(ttl);
  }
  Override(absl::GetFlag(FLAGS_state_dir), config.mutable_state_dir());
  rdmad::config::ApplyDefaults(config);
  if (absl::Status s =
          rdmad::config::ValidateConfig(config, "command line");
      !s.ok()) {
    return s;
  }
  return config;
}

}  // namespace

namespace {

// "--check-config" for "--check_config", and so for every flag: people
// type dashes (as other daemons' flags have them), absl knows underscores.
// Only the name before '=' changes; values are left alone.
void UnderscoreFlagNames(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    char* arg = argv[i];
    if (arg[0] != '-' || arg[1] != '-') continue;
    if (arg[2] == '\0') break;  // "--": what follows is not a flag
    for (char* c = arg + 2; *c != '\0' && *c != '='; ++c) {
      if (*c == '-') *c = '_';
    }
  }
}

// --check-config FILE: builds the configuration a start would use and
// reports it, without starting anything (as `nginx -t`, `sshd -t`).
int CheckConfigOnly(const std::string& path) {
  if (!absl::GetFlag(FLAGS_config).empty() &&
      absl::GetFlag(FLAGS_config) != path) {
    std::fprintf(stderr,
                 "rdmad: --check-config %s and --config %s name two files: "
                 "give one\n",
                 path.c_str(), absl::GetFlag(FLAGS_config).c_str());
    return kExitBadSetup;
  }
  absl::SetFlag(&FLAGS_config, path);
  auto built = BuildConfig();
  if (!built.ok()) {
    std::fprintf(stderr, "rdmad: %s\n",
                 std::string(built.status().message()).c_str());
    return kExitBadSetup;
  }
  std::printf("rdmad: %s: configuration is valid\n", path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  UnderscoreFlagNames(argc, argv);
  if (const int status = CheckArguments(argc, argv); status >= 0) {
    return status;
  }
  absl::ParseCommandLine(argc, argv);
  if (const std::string path = absl::GetFlag(FLAGS_check_config);
      !path.empty()) {
    return CheckConfigOnly(path);
  }
#ifdef NDEBUG
  // Debian's abseil is built without NDEBUG, so each absl::Mutex lock also
  // updates a lock graph for deadlock detection: a tenth of the daemon's
  // CPU on small operations. Release builds leave it out; debug and
  // sanitizer builds (no NDEBUG) keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif

  rdmad::startup::SetUpLogging();

  auto built = BuildConfig();
  if (!built.ok()) {
    spdlog::critical("{}", std::string(built.status().message()));
    return kExitBadSetup;
  }
  const rdmad::v1::DaemonConfig config = *std::move(built);
  spdlog::set_level(spdlog::level::from_str(config.log_level()));
  if (absl::Status s = CheckPorts(config); !s.ok()) {
    spdlog::critical("cannot start: {}", std::string(s.message()));
    return kExitBadSetup;
  }
  const rdmad::startup::OpenFilesLimit files =
      rdmad::startup::RaiseOpenFilesLimit();
  if (files.now != files.before) {
    spdlog::info("open files limit raised from {} to {}", files.before,
                 files.now);
  }

  // Block the signals we handle before any thread starts, so that every
  // thread inherits the mask and only sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // A file growing past RLIMIT_FSIZE (a region's memfd) would kill the
  // daemon with SIGXFSZ; ignored, the call fails with EFBIG instead and
  // that one request gets RESOURCE_EXHAUSTED (core/shm_segment.cc).
  signal(SIGXFSZ, SIG_IGN);

  // Under systemd (Type=notify): READY=1 only now that both gRPC servers
  // listen; a no-op elsewhere.
  rdmad::process::SystemdNotifier notifier;
  auto daemon = rdmad::Daemon::Start(config, absl::GetFlag(FLAGS_config));
  if (!daemon.ok()) {
    spdlog::critical("cannot start: {}", daemon.status().ToString());
    notifier.Status(absl::StrCat("cannot start: ", daemon.status().message()));
    return IsSetupError(daemon.status()) ? kExitBadSetup : kExitRunFailure;
  }
  const std::string serving = absl::StrCat(
      "serving local ", config.socket(), ", peer ", (*daemon)->peer_address());
  notifier.Ready(serving);
  // Each keep-alive is earned by the daemon answering its own GetStatus.
  rdmad::process::SelfCheck self_check(config.socket());
  notifier.StartWatchdog([&self_check](absl::Duration budget) {
    return self_check.Run(budget);
  });
  for (;;) {
    int received = 0;
    if (sigwait(&signals, &received) != 0) continue;
    if (received == SIGHUP) {
      // A file that does not parse changes nothing: the daemon keeps
      // running with what it has.
      notifier.Reloading("reloading configuration");
      spdlog::info("SIGHUP: reloading configuration");
      auto next = BuildConfig();
      if (next.ok()) {
        (*daemon)->Reload(*next);
      } else {
        spdlog::error("config reload failed, nothing changed: {}",
                      std::string(next.status().message()));
      }
      notifier.Ready(serving);
      continue;
    }
    spdlog::info("{} received; shutting down", received == SIGTERM ? "SIGTERM"
                                                                    : "SIGINT");
    break;
  }
  notifier.Stopping("shutting down");
  // Before Shutdown: the self-check would fail against a server that is
  // going away, and shutdown is bounded (5 s grace) well within
  // WatchdogSec=.
  notifier.StopWatchdog();
  (*daemon)->Shutdown();
  return 0;
}
