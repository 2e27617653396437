// rdmad::Daemon: wires the core, the transports and the gRPC servers
// together and owns them. main() parses flags and calls Start/Wait/Shutdown.
#ifndef RDMAD_DAEMON_DAEMON_H_
#define RDMAD_DAEMON_DAEMON_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/config/config_file.h"
#include "rdmad/v1/config.pb.h"

namespace rdmad {

// The config file, defaults and checks live in daemon/config/.
using config::ApplyDefaults;
using config::LoadConfigFile;

class Daemon {
 public:
  // Discovers devices, builds the core and starts both gRPC servers and the
  // session socket. On error nothing is left running or bound.
  // `config_file` is the file `config` was read from ("" for none), for
  // rdmactl status.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(
      const v1::DaemonConfig& config, std::string config_file = "");

  // Ends in-flight calls with a status, closes every session (freeing its
  // buffers), frees daemon-owned regions and removes the socket files.
  // Idempotent; also run by the destructor.
  void Shutdown();

  ~Daemon();

  // The Peer address as bound (with the real port if 0 was asked for).
  const std::string& peer_address() const;

  // Takes a re-read configuration (SIGHUP): applies the fields that can
  // change safely (log_level, socket_mode, metrics_listen) and logs, per
  // other changed field, that it needs a restart and was not applied. The
  // daemon keeps running whatever happens; a field that fails to apply
  // (e.g. the new metrics port is taken) keeps its old value and is logged.
  // Call from one thread at a time (main's signal loop).
  void Reload(const v1::DaemonConfig& next);

  // HOST:PORT of the metrics endpoint as bound, "" when off.
  std::string metrics_address() const;

 private:
  struct Impl;
  explicit Daemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rdmad

#endif  // RDMAD_DAEMON_DAEMON_H_
