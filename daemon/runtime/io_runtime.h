// IoRuntime: the daemon's fixed pool of event loops.
//
// Every data channel to a peer (TCP sockets, verbs completion channels),
// every connection of the TCP data server and every client queue's ring is
// placed on one of these loops, so the daemon's thread count depends on its
// configuration (io_threads, engine_threads), never on how many peers,
// connections or clients it has.
//
// The first `engine_threads` loops are engine loops: they poll the clients'
// shared-memory queues and carry the data channels to peers, so an
// operation a client submits goes from its ring to the socket or the NIC
// without changing threads. The other loops serve the connections peers
// open to this daemon. With a single loop it does everything.
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
  int threads = 2;         // all loops (at least engine_threads)
  int engine_threads = 1;  // of which engine loops
  std::string name = "rdmad-io";  // threads are named NAME0, NAME1...
  // How long a loop keeps polling its pollers (rings, CQs) after the last
  // work they found before it sleeps.
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
  // The next engine loop (queues, channels to peers), round-robin.
  EventLoop* PickEngine();
  // The next loop serving peers' connections, round-robin (an engine loop
  // when all are).
  EventLoop* PickServing();
  size_t engines() const { return engines_; }
  EventLoop* loop(size_t i) const { return loops_[i].get(); }
  size_t size() const { return loops_.size(); }

  // Stops every loop (each runs its queued tasks first) and joins them.
  // Idempotent.
  void Stop();

 private:
  IoRuntime(std::vector<std::unique_ptr<EventLoop>> loops, size_t engines)
      : loops_(std::move(loops)), engines_(engines) {}

  const std::vector<std::unique_ptr<EventLoop>> loops_;
  const size_t engines_;
  std::atomic<size_t> next_{0};
  std::atomic<size_t> next_engine_{0};
  std::atomic<size_t> next_serving_{0};
};

}  // namespace rdmad::runtime

#endif  // RDMAD_DAEMON_RUNTIME_IO_RUNTIME_H_
