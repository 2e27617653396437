// EventLoop: one thread running epoll for a set of nonblocking sockets.
//
// The owner (a Delegate) registers file descriptors with a 64-bit tag of its
// choosing and gets OnEvent(tag, events) on the loop thread. Tags rather than
// pointers: an event that was already fetched for a socket the delegate has
// since closed (or closed and reopened under the same fd number) carries a
// tag the delegate no longer knows, and is simply ignored.
//
// Example:
//   class Server : public EventLoop::Delegate { ... };
//   RDMAD_ASSIGN_OR_RETURN(auto loop, EventLoop::Create("tcp-srv-0", &server));
//   RDMAD_RETURN_IF_ERROR(loop->Add(listen_fd, EPOLLIN, kListenTag));
//   loop->Start();
//   loop->Post([&] { ... runs on the loop thread ... });
//   loop->Stop();  // joins; OnStop ran on the loop thread
#ifndef RDMAD_DAEMON_TRANSPORT_TCP_EVENT_LOOP_H_
#define RDMAD_DAEMON_TRANSPORT_TCP_EVENT_LOOP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"

namespace rdmad::tcp {

class EventLoop {
 public:
  // Callbacks of the loop; all run on the loop thread.
  class Delegate {
   public:
    // `events` of the fd registered with `tag` (never 0).
    virtual void OnEvent(uint64_t tag, uint32_t events) = 0;
    // After every batch of events and posted tasks. Returns when it wants
    // to be called again at the latest (InfiniteFuture: only after events).
    virtual absl::Time OnTick(absl::Time now) = 0;
    // Once, after Stop() was asked for, before the thread exits.
    virtual void OnStop() = 0;

   protected:
    ~Delegate() = default;
  };

  // `delegate` is not owned and must outlive the loop's thread.
  static absl::StatusOr<std::unique_ptr<EventLoop>> Create(std::string name,
                                                           Delegate* delegate);
  // Stops and joins the thread if it is still running.
  ~EventLoop();

  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Starts the thread.
  void Start();
  // Asks the thread to finish (OnStop, then exit) and joins it. From the
  // loop thread itself it only asks. Idempotent.
  void Stop();

  // epoll registration (EPOLLIN/EPOLLOUT...; level-triggered). Thread-safe,
  // but normally called on the loop thread.
  absl::Status Add(int fd, uint32_t events, uint64_t tag);
  absl::Status Modify(int fd, uint32_t events, uint64_t tag);
  void Remove(int fd);

  // Runs `task` on the loop thread soon. Thread-safe. Tasks posted after
  // the loop stopped are destroyed without running.
  void Post(absl::AnyInvocable<void()> task);
  // Makes the loop run OnTick soon. Thread-safe.
  void Wake();

  bool InLoopThread() const;
  const std::string& name() const { return name_; }

 private:
  EventLoop(std::string name, Delegate* delegate, UniqueFd epoll,
            UniqueFd wake);
  void Run();
  void RunTasks();

  const std::string name_;
  Delegate* const delegate_;  // Not owned.
  UniqueFd epoll_;
  UniqueFd wake_;  // eventfd
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> started_{false};
  std::atomic<std::thread::id> loop_thread_id_{};

  absl::Mutex mu_;
  std::vector<absl::AnyInvocable<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool joined_ = false;
};

}  // namespace rdmad::tcp

#endif  // RDMAD_DAEMON_TRANSPORT_TCP_EVENT_LOOP_H_
