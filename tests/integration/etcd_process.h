// A real etcd (Debian etcd-server) for integration tests: on 127.0.0.1 with
// free ports, its data in the test's temporary directory, killed with the
// object. Stop() and Start() again keep the data and the ports, as an
// operator's restart would.
//
// Example:
//   TempDir dir;
//   auto etcd = EtcdProcess::Start(dir.path());
//   ASSERT_TRUE(etcd.ok()) << etcd.status();
//   std::string url = (*etcd)->url();  // "etcd://127.0.0.1:PORT"
#ifndef RDMAD_TESTS_INTEGRATION_ETCD_PROCESS_H_
#define RDMAD_TESTS_INTEGRATION_ETCD_PROCESS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {

// The etcd binary ($ETCD_BINARY, else etcd on PATH); "" if there is none.
std::string EtcdBinary();

// Why a test that needs etcd cannot run here, or "" if it can. In CI
// (CI set in the environment) a missing etcd is a failure, not a skip:
// callers FAIL() with the message then, and GTEST_SKIP() otherwise.
std::string EtcdMissingReason();

class EtcdProcess {
 public:
  static absl::StatusOr<std::unique_ptr<EtcdProcess>> Start(
      const std::string& dir);
  ~EtcdProcess();

  // SIGKILL (no goodbye to clients) and reap.
  void Kill();
  // Starts it again on the same ports with the same data; returns once it
  // answers.
  absl::Status Restart();

  std::string url() const;       // "etcd://127.0.0.1:PORT"
  std::string endpoint() const;  // "127.0.0.1:PORT"

 private:
  EtcdProcess() = default;
  absl::Status Launch();

  std::string dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  std::unique_ptr<ChildProcess> child_;
};

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_INTEGRATION_ETCD_PROCESS_H_
