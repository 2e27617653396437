// rdmad::Daemon: wires the core, the transports and the gRPC servers
// together and owns them. main() parses flags and calls Start/Wait/Shutdown.
#ifndef RDMAD_DAEMON_DAEMON_H_
#define RDMAD_DAEMON_DAEMON_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "rdmad/v1/config.pb.h"

namespace rdmad {

// Fills unset fields of `config` with rdmad's defaults.
void ApplyDefaults(v1::DaemonConfig& config);

// Reads a text-format DaemonConfig. Errors name the file, line and field.
absl::StatusOr<v1::DaemonConfig> LoadConfigFile(const std::string& path);

class Daemon {
 public:
  // Discovers devices, builds the core and starts both gRPC servers and the
  // session socket. On error nothing is left running or bound.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(
      const v1::DaemonConfig& config);

  // Ends in-flight calls with a status, closes every session (freeing its
  // buffers), frees daemon-owned regions and removes the socket files.
  // Idempotent; also run by the destructor.
  void Shutdown();

  ~Daemon();

  // The Peer address as bound (with the real port if 0 was asked for).
  const std::string& peer_address() const;

 private:
  struct Impl;
  explicit Daemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rdmad

#endif  // RDMAD_DAEMON_DAEMON_H_
