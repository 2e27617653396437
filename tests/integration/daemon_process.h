// Test fixtures for integration tests: real rdmad daemons as child
// processes, and running command-line tools with a deadline.
//
// Example:
//   TempDir dir;
//   auto d1 = DaemonProcess::Start(dir.path(), "d1");
//   ASSERT_TRUE(d1.ok()) << d1.status();
//   auto client = rdmad::Client::Connect({.socket_path = (*d1)->socket()});
//   auto out = RunProcess({RdmactlBinary(), "--socket", (*d1)->socket(),
//                          "status", "--json"});
#ifndef RDMAD_TESTS_INTEGRATION_DAEMON_PROCESS_H_
#define RDMAD_TESTS_INTEGRATION_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace rdmad::testing {

// Paths of the binaries under test (from the build, via compile definitions;
// overridable with the RDMAD_BINARY / RDMACTL_BINARY environment variables).
std::string RdmadBinary();
std::string RdmactlBinary();

// A fresh directory under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Waits (bounded) until every thread of `pid` is in the stopped state
// (after a SIGSTOP, which is delivered asynchronously).
bool WaitAllThreadsStopped(pid_t pid, absl::Duration timeout);

// What each of `pid`'s descriptors refers to (its /proc/PID/fd link, e.g.
// "socket:[123]", "/dmabuf:"); nothing if the process is gone.
std::optional<std::vector<std::string>> FdTargets(pid_t pid);

// How many descriptors `pid` holds; -1 if the process is gone.
int OpenFds(pid_t pid);

// The whole text of the file at `path`; "" if it cannot be read.
std::string ReadTextFile(const std::string& path);

// A TCP port on 127.0.0.1 that no socket had a moment ago, below the
// kernel's ephemeral range where there is room (so no outgoing connection
// takes it meanwhile); the kernel's pick otherwise; 0 if none could be had.
// For a listener that must come back on the same port after a restart.
int FreeLoopbackPort();

struct ProcessResult {
  int exit_code = -1;    // -1 if killed by a signal or timed out
  int signal = 0;        // the signal that ended it, if any
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv[0] with arguments, feeding `input` on stdin, and collects its
// output. Kills it (SIGKILL) at the deadline.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::string& input = "",
                         absl::Duration timeout = absl::Seconds(60));

// A running child process with its output going to a log file.
class ChildProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(
      const std::vector<std::string>& argv, const std::string& log_path);
  // Takes charge of a child this process forked itself.
  static std::unique_ptr<ChildProcess> Own(pid_t pid);
  ~ChildProcess();  // SIGKILL + reap if still running

  pid_t pid() const { return pid_; }
  // Sends `sig`. Does not wait.
  void Signal(int sig);
  // Waits up to `timeout` for exit; returns the wait status or
  // DEADLINE_EXCEEDED.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  bool running() const { return pid_ > 0; }

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
};

// The transport integration tests run daemons with: "tcp" unless the
// environment says otherwise (the soft-RoCE lab runs the same tests with
// RDMAD_TEST_TRANSPORT=verbs).
inline std::string TestTransport() {
  const char* env = std::getenv("RDMAD_TEST_TRANSPORT");
  return env != nullptr && *env != '\0' ? env : "tcp";
}

struct DaemonOptions {
  std::string transport = TestTransport();
  std::string peer_listen = "127.0.0.1:0";
  std::vector<std::string> extra_args;
  // When set, Start writes this text to DIR/NAME.conf and runs the daemon
  // with --config on that file, before `extra_args`.
  std::optional<std::string> config;
  // Runs the daemon through this command, which must exec it in the same
  // process: e.g. {"/usr/bin/prlimit", "--nofile=1024:4096", "--"}, or a
  // launcher that sets resource limits or another uid first.
  std::vector<std::string> command_prefix;
  // --log_level for the daemon.
  std::string log_level = "debug";
};

// An rdmad child with its own socket under `dir`. Start() returns once the
// daemon answers GetStatus on its socket (or fails with its log tail).
class DaemonProcess {
 public:
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Start(
      const std::string& dir, const std::string& name,
      DaemonOptions options = {});
  ~DaemonProcess();  // Stop()

  // SIGTERM, wait (10 s), then SIGKILL. Returns the exit status.
  absl::StatusOr<int> Stop();
  // SIGKILL and reap: a crash, as far as peers can tell.
  void Kill();
  // Starts it again with the same socket and the same peer port.
  absl::Status Restart();
  // SIGSTOP, then waits (10 s) until every thread of it has stopped. The
  // signal is delivered asynchronously: on a loaded machine a thread can
  // still finish work for a while, which a test that expects that work to
  // hang must not race. False if it did not stop in time.
  bool Pause();
  // SIGCONT.
  void Resume();

  pid_t pid() const;
  const std::string& socket() const { return socket_; }
  const std::string& peer_address() const { return peer_address_; }
  const std::string& log_path() const { return log_path_; }
  // The last 4000 characters of its log; Log(): all of it.
  std::string LogTail() const;
  std::string Log() const;

 private:
  DaemonProcess() = default;
  absl::Status Launch(const std::string& peer_listen);

  std::string name_;
  std::string socket_;
  std::string log_path_;
  std::string peer_address_;
  DaemonOptions options_;
  std::unique_ptr<ChildProcess> child_;
};

// The port of `daemon`'s TCP data listener, from its log; 0 if the log
// does not say (yet, or with the verbs transport).
int DataPort(const DaemonProcess& daemon);

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_INTEGRATION_DAEMON_PROCESS_H_
