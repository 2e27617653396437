// StateFileGuard: keeps the memory files of a state directory at the sizes
// of their regions while the daemon runs.
//
// A state-directory file cannot be sealed (only memfds can), and a client
// allowed to write a kept region needs a writable descriptor of its file to
// map it writable. With that descriptor it can also ftruncate, fallocate or
// write past the end, and so make the file hold memory past the region and
// past its uid's quota. No descriptor the kernel hands out allows a
// writable shared mapping yet forbids that (a writable MAP_SHARED mapping
// needs the file open for writing; seals are for memfds only). So the guard
// watches the directory with inotify: each of those calls raises
// IN_MODIFY, while stores through a mapping cannot change a file's size.
// On each event it cuts the live regions' files back to their regions'
// sizes (core::CutFileBackTo), on a thread of its own. A client can hold
// memory past its region only between its call and the cut; the daemon
// neither keeps nor counts it, and the next start cuts back whatever grew
// while no daemon ran (ShmSegment::OpenFile).
//
// Example:
//   auto guard = StateFileGuard::Start(dir_fd, "/dev/shm/rdmad");
//   (*guard)->Watch("5f0c2a7e91d3b846.mem", 1 << 20, "region 'kv'");
//   ...
//   (*guard)->Unwatch("5f0c2a7e91d3b846.mem");  // freed
//
// Thread-safe. Runs one thread, rdmad-sizeguard, which the destructor
// stops.
#ifndef RDMAD_DAEMON_STATE_STATE_FILE_GUARD_H_
#define RDMAD_DAEMON_STATE_STATE_FILE_GUARD_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"

namespace rdmad::state {

class StateFileGuard {
 public:
  // Watches the directory open as `dir_fd` (not owned; it outlives the
  // guard); `path` names it in messages. Fails where inotify does (its
  // per-user limits: fs.inotify.max_user_instances and max_user_watches).
  static absl::StatusOr<std::unique_ptr<StateFileGuard>> Start(
      int dir_fd, std::string path);
  ~StateFileGuard();  // stops the thread

  StateFileGuard(const StateFileGuard&) = delete;
  StateFileGuard& operator=(const StateFileGuard&) = delete;

  // From now on `file` (a name in the directory) is kept to `mapped_size`
  // bytes; `label` names its region in log lines. It is checked at once.
  void Watch(const std::string& file, uint64_t mapped_size, std::string label);
  // `file` is no longer a live region's (freed, or put aside).
  void Unwatch(const std::string& file);

  // How many times a file was found larger than its region and cut back.
  uint64_t cuts() const { return cuts_.load(); }

 private:
  StateFileGuard(int dir_fd, std::string path, UniqueFd inotify, UniqueFd wake);
  void Run();
  // Cuts `file` back if it is watched and holds more than its region.
  void Check(const std::string& file);
  void CheckAll();

  struct Watched {
    uint64_t mapped_size = 0;
    std::string label;
  };

  const int dir_fd_;  // Not owned.
  const std::string path_;
  const UniqueFd inotify_;
  const UniqueFd wake_;  // eventfd: the destructor's stop signal
  std::atomic<uint64_t> cuts_{0};
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Watched> watched_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace rdmad::state

#endif  // RDMAD_DAEMON_STATE_STATE_FILE_GUARD_H_
