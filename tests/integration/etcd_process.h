// A real etcd (Debian etcd-server) for integration tests: on 127.0.0.1 with
// free ports, its data in the test's temporary directory, killed with the
// object. Restart() keeps the data and the ports, as an operator's restart
// would; RestartEmpty() keeps only the ports, as a restore that lost the
// data would. It can serve TLS and require client certificates, and Ctl()
// runs etcdctl against it (to set up users and roles, or to write keys as
// someone other than rdmad would).
//
// Example:
//   TempDir dir;
//   auto etcd = EtcdProcess::Start(dir.path());
//   ASSERT_TRUE(etcd.ok()) << etcd.status();
//   std::string url = (*etcd)->url();  // "etcd://127.0.0.1:PORT"
//   ProcessResult put = (*etcd)->Ctl({"put", "/rdmad/x", "y"});
#ifndef RDMAD_TESTS_INTEGRATION_ETCD_PROCESS_H_
#define RDMAD_TESTS_INTEGRATION_ETCD_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {

// The etcd binary ($ETCD_BINARY, else etcd on PATH); "" if there is none.
std::string EtcdBinary();

// Why a test that needs etcd cannot run here, or "" if it can. In CI
// (CI set in the environment) a missing etcd is a failure, not a skip:
// callers FAIL() with the message then, and GTEST_SKIP() otherwise.
std::string EtcdMissingReason();

// The etcdctl binary ($ETCDCTL_BINARY, else etcdctl on PATH).
std::string EtcdctlBinary();

struct EtcdOptions {
  // TLS on the client port: etcd's certificate and key (PEM files). With
  // client_ca_file too, etcd requires client certificates signed by that
  // CA (--client-cert-auth) and, with authentication enabled, takes a
  // certificate's common name as the user.
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
  // --auth-token-ttl in seconds; 0: etcd's default (300).
  int auth_token_ttl_seconds = 0;
};

class EtcdProcess {
 public:
  static absl::StatusOr<std::unique_ptr<EtcdProcess>> Start(
      const std::string& dir, EtcdOptions options = {});
  ~EtcdProcess();

  // SIGKILL (no goodbye to clients) and reap.
  void Kill();
  // Starts it again on the same ports with the same data; returns once it
  // answers.
  absl::Status Restart();
  // Kills it, deletes its data and starts it again on the same ports:
  // etcd back after an outage, empty (its revisions start again from 1).
  absl::Status RestartEmpty();

  // etcdctl ARGS against this etcd, with set_ctl_flags' flags before them
  // (credentials: "--user=root:PW", "--cacert=...", "--cert=...").
  ProcessResult Ctl(const std::vector<std::string>& args) const;
  void set_ctl_flags(std::vector<std::string> flags) {
    ctl_flags_ = std::move(flags);
  }

  std::string url() const;       // "etcd://127.0.0.1:PORT"
  std::string endpoint() const;  // "127.0.0.1:PORT"

 private:
  EtcdProcess() = default;
  absl::Status Launch();

  std::string dir_;
  EtcdOptions options_;
  int client_port_ = 0;
  int peer_port_ = 0;
  std::vector<std::string> ctl_flags_;
  std::unique_ptr<ChildProcess> child_;
};

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_INTEGRATION_ETCD_PROCESS_H_
