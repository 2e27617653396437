// ServiceManagerStandIn: plays systemd for rdmad in tests, as far as kept
// regions need it:
//   - the notify socket ($NOTIFY_SOCKET, an AF_UNIX datagram socket) with a
//     file descriptor store: FDSTORE=1 messages' descriptors (SCM_RIGHTS)
//     are kept under their FDNAME=, FDSTOREREMOVE=1 drops them, READY=1 is
//     counted;
//   - starting the daemon with the stored descriptors passed back as
//     systemd passes them: at 3.. with $LISTEN_FDS, $LISTEN_FDNAMES and
//     $LISTEN_PID set to the daemon's own pid (a shell sets it to $$ and
//     execs rdmad, which keeps the pid).
// A thread receives the messages as they come: the kernel queues only a few
// datagrams per socket (net.unix.max_dgram_qlen), and a daemon blocked on a
// full queue would stall the call that made it notify. Reading the store
// first waits for the thread to handle every message queued before the
// read (a marker datagram of its own, behind them in the same queue), so a
// test sees what the daemon said before its call returned, however slowly
// the receiver runs.
//
// Example:
//   auto manager = ServiceManagerStandIn::Start(dir.path());
//   auto daemon = (*manager)->Launch({RdmadBinary(), ...}, log);
//   ASSERT_TRUE((*manager)->WaitReady(absl::Seconds(30)));
//   (*manager)->StoredNames();  // {"rdmad-mem-...", "rdmad-rec-...-1"}
#ifndef RDMAD_TESTS_INTEGRATION_SERVICE_MANAGER_STAND_IN_H_
#define RDMAD_TESTS_INTEGRATION_SERVICE_MANAGER_STAND_IN_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {

class ServiceManagerStandIn {
 public:
  // Binds the notify socket at DIR/notify.sock and starts receiving.
  static absl::StatusOr<std::unique_ptr<ServiceManagerStandIn>> Start(
      const std::string& dir);
  ~ServiceManagerStandIn();  // stops and joins the receiver

  const std::string& notify_socket() const { return path_; }

  // Starts argv (argv[0]: the binary) with $NOTIFY_SOCKET and the store's
  // descriptors passed back; output goes to `log_path`.
  absl::StatusOr<std::unique_ptr<ChildProcess>> Launch(
      const std::vector<std::string>& argv, const std::string& log_path);

  // Waits until a READY=1 arrived since the last Launch.
  bool WaitReady(absl::Duration timeout);

  // The names of the stored descriptors, sorted, one per descriptor, once
  // every message sent before the call has been handled.
  std::vector<std::string> StoredNames() const;
  // Replaces the descriptors named `name` with `fd` (to damage a record).
  void Replace(const std::string& name, UniqueFd fd);
  // A duplicate of the (first) descriptor named `name`, or an empty fd.
  UniqueFd Duplicate(const std::string& name) const;

 private:
  ServiceManagerStandIn() = default;
  void ReceiveLoop();
  void Handle(const std::string& message, std::vector<UniqueFd> fds);
  // Sends a marker to the notify socket and waits until the receiver has
  // handled it, and so everything queued before it.
  void Settle() const;

  std::string path_;
  UniqueFd socket_;
  UniqueFd wake_;  // eventfd: tells the receiver to stop
  std::thread receiver_;

  mutable absl::Mutex mu_;
  std::multimap<std::string, UniqueFd> store_ ABSL_GUARDED_BY(mu_);
  int ready_ ABSL_GUARDED_BY(mu_) = 0;  // READY=1 since the last Launch
  mutable uint64_t markers_sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t markers_handled_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_INTEGRATION_SERVICE_MANAGER_STAND_IN_H_
