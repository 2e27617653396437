// IoRuntime: the daemon's fixed pool of event loops.
//
// Every data channel to a peer (TCP sockets, verbs completion channels) and
// every connection of the TCP data server is placed on one of these loops,
// so the daemon's thread count depends on its configuration (io_threads),
// never on how many peers or connections it has. Objects are spread over
// the loops round-robin as they are created.
//
// Example:
//   RDMAD_ASSIGN_OR_RETURN(auto runtime, IoRuntime::Start({.threads = 2}));
//   EventLoop* loop = runtime->Pick();
//   loop->Post([] { ... });
//   runtime->Stop();
#ifndef RDMAD_DAEMON_RUNTIME_IO_RUNTIME_H_
#define RDMAD_DAEMON_RUNTIME_IO_RUNTIME_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/runtime/event_loop.h"

namespace rdmad::runtime {

struct IoRuntimeOptions {
  int threads = 2;
  std::string name = "rdmad-io";  // threads are named NAME0, NAME1...
  EventLoop::Options loop;
};

// Thread-safe.
class IoRuntime {
 public:
  static absl::StatusOr<std::unique_ptr<IoRuntime>> Start(
      IoRuntimeOptions options);
  // Stop().
  ~IoRuntime();

  // The next loop, round-robin. Valid until the runtime is destroyed.
  EventLoop* Pick();
  EventLoop* loop(size_t i) const { return loops_[i].get(); }
  size_t size() const { return loops_.size(); }

  // Stops every loop (each runs its queued tasks first) and joins them.
  // Idempotent.
  void Stop();

 private:
  explicit IoRuntime(std::vector<std::unique_ptr<EventLoop>> loops)
      : loops_(std::move(loops)) {}

  const std::vector<std::unique_ptr<EventLoop>> loops_;
  std::atomic<size_t> next_{0};
};

}  // namespace rdmad::runtime

#endif  // RDMAD_DAEMON_RUNTIME_IO_RUNTIME_H_
