// DaemonIdentity and MetricsAddress: who this daemon is, and where its
// metrics are served, as the gRPC services tell it. Built and owned by
// rdmad::Daemon; the services only borrow them.
#ifndef RDMAD_DAEMON_SERVICE_DAEMON_IDENTITY_H_
#define RDMAD_DAEMON_SERVICE_DAEMON_IDENTITY_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/transport_kind.h"

namespace rdmad::service {

// Identity and configuration fixed for the daemon's life.
struct DaemonIdentity {
  std::string version;
  uint64_t incarnation = 0;  // random per start, so peers notice restarts
  core::TransportKind transport = core::TransportKind::kTcp;
  std::string transport_reason;
  std::string local_socket;
  std::string peer_listen;
  std::string data_listen;  // HOST:PORT of the TCP data listener, as bound
  std::string config_file;  // the file --config named; "" for none
  absl::Time started;
  uint64_t memlock_limit = 0;  // 0 = unlimited
};

// The Prometheus endpoint's address, which a reload may change while the
// services read it. Thread-safe.
class MetricsAddress {
 public:
  void Set(std::string address) {
    absl::MutexLock lock(&mu_);
    address_ = std::move(address);
  }
  // HOST:PORT, "" when metrics are off.
  std::string Get() const {
    absl::MutexLock lock(&mu_);
    return address_;
  }

 private:
  mutable absl::Mutex mu_;
  std::string address_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_DAEMON_IDENTITY_H_
