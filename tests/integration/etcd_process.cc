#include "tests/integration/etcd_process.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rdmad::testing {
namespace {

bool Accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok =
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// $`variable`, else `name` on PATH; "" if neither.
std::string FindBinary(const char* variable, const char* name) {
  if (const char* env = std::getenv(variable); env != nullptr && *env) {
    return env;
  }
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

std::string EtcdBinary() { return FindBinary("ETCD_BINARY", "etcd"); }

std::string EtcdctlBinary() { return FindBinary("ETCDCTL_BINARY", "etcdctl"); }

std::string EtcdMissingReason() {
  if (!EtcdBinary().empty()) return "";
  return "no etcd binary (install Debian's etcd-server: scripts/deps.sh "
         "demo does; or set ETCD_BINARY)";
}

absl::StatusOr<std::unique_ptr<EtcdProcess>> EtcdProcess::Start(
    const std::string& dir, EtcdOptions options) {
  std::unique_ptr<EtcdProcess> etcd(new EtcdProcess());
  etcd->dir_ = dir;
  etcd->options_ = std::move(options);
  etcd->client_port_ = FreeLoopbackPort();
  etcd->peer_port_ = FreeLoopbackPort();
  if (absl::Status s = etcd->Launch(); !s.ok()) return s;
  return etcd;
}

EtcdProcess::~EtcdProcess() { Kill(); }

absl::Status EtcdProcess::Launch() {
  const bool tls = !options_.cert_file.empty();
  const std::string client =
      absl::StrCat(tls ? "https" : "http", "://127.0.0.1:", client_port_);
  const std::string peer = absl::StrCat("http://127.0.0.1:", peer_port_);
  std::vector<std::string> argv = {
      EtcdBinary(),
      "--name", "test",
      "--data-dir", absl::StrCat(dir_, "/etcd-data"),
      "--listen-client-urls", client,
      "--advertise-client-urls", client,
      "--listen-peer-urls", peer,
      "--initial-advertise-peer-urls", peer,
      "--initial-cluster", absl::StrCat("test=", peer),
      // No metrics listener or other extras on ports we did not pick.
      "--listen-metrics-urls", "",
      "--log-level", "warn",
  };
  if (tls) {
    argv.insert(argv.end(), {"--cert-file", options_.cert_file, "--key-file",
                             options_.key_file});
  }
  if (!options_.client_ca_file.empty()) {
    argv.insert(argv.end(), {"--client-cert-auth", "--trusted-ca-file",
                             options_.client_ca_file});
  }
  if (options_.auth_token_ttl_seconds != 0) {
    argv.insert(argv.end(), {"--auth-token-ttl",
                             absl::StrCat(options_.auth_token_ttl_seconds)});
  }
  auto child = ChildProcess::Spawn(argv, absl::StrCat(dir_, "/etcd.log"));
  if (!child.ok()) return child.status();
  child_ = *std::move(child);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (Accepts(client_port_)) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("etcd did not listen on ", endpoint(), " within 30 s (see ",
                   dir_, "/etcd.log)"));
}

void EtcdProcess::Kill() {
  if (child_ == nullptr) return;
  child_->Signal(SIGKILL);
  (void)child_->Wait(absl::Seconds(10));
  child_.reset();
}

absl::Status EtcdProcess::Restart() {
  Kill();
  return Launch();
}

absl::Status EtcdProcess::RestartEmpty() {
  Kill();
  const ProcessResult removed =
      RunProcess({"/bin/rm", "-rf", absl::StrCat(dir_, "/etcd-data")});
  if (removed.exit_code != 0) {
    return absl::InternalError(absl::StrCat("rm: ", removed.err));
  }
  return Launch();
}

ProcessResult EtcdProcess::Ctl(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {
      EtcdctlBinary(),
      absl::StrCat(
          "--endpoints=", options_.cert_file.empty() ? "http" : "https", "://",
          endpoint())};
  argv.insert(argv.end(), ctl_flags_.begin(), ctl_flags_.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, "", absl::Seconds(30));
}

std::string EtcdProcess::endpoint() const {
  return absl::StrCat("127.0.0.1:", client_port_);
}

std::string EtcdProcess::url() const {
  return absl::StrCat("etcd://", endpoint());
}

}  // namespace rdmad::testing
