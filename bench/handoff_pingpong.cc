// rdmad_handoff_pingpong: one operation at a time through the four
// cross-thread hand-offs of an rdmad remote operation (client -> engine ->
// serving loop -> engine -> client), one byte over Unix socket pairs, with
// nothing else done: what waking the next thread costs on busy CPUs.
//
//   rdmad_handoff_pingpong MODE ITERATIONS [SLICE_US]
//
// MODE write-read: each hand-off is write(), then read() for the next one
// (two system calls; the writer is still running when the woken thread
// wants the CPU). MODE uring: the write and the next read go to io_uring
// together and the thread waits for both in one io_uring_enter, so it is
// asleep when the answer comes. SLICE_US > 0 asks EEVDF for that slice
// (sched_setattr's sched_runtime, Linux 6.12 and later), as the daemon's
// event loops do. Prints p50, p99 and p99.9 of the client's round trips
// in microseconds, as one line of JSON.
#include <liburing.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "daemon/runtime/scheduler_slice.h"

namespace {

enum class Mode { kWriteRead, kUring };

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

// One thread's way of handing over: write one byte to `to`, then wait for
// one byte from `from`.
class Hop {
 public:
  explicit Hop(Mode mode) : mode_(mode) {
    if (mode_ == Mode::kUring && io_uring_queue_init(8, &ring_, 0) < 0) {
      Die("io_uring_queue_init");
    }
  }
  ~Hop() {
    if (mode_ == Mode::kUring) io_uring_queue_exit(&ring_);
  }
  Hop(const Hop&) = delete;
  Hop& operator=(const Hop&) = delete;

  void Send(int to) {
    if (write(to, &out_, 1) != 1) Die("write");
  }
  void Receive(int from) {
    if (read(from, &in_, 1) != 1) Die("read");
  }
  void SendThenReceive(int to, int from) {
    if (mode_ == Mode::kWriteRead) {
      Send(to);
      Receive(from);
      return;
    }
    io_uring_prep_write(io_uring_get_sqe(&ring_), to, &out_, 1, 0);
    io_uring_prep_read(io_uring_get_sqe(&ring_), from, &in_, 1, 0);
    if (io_uring_submit_and_wait(&ring_, 2) < 0) Die("io_uring_submit_and_wait");
    for (int i = 0; i < 2; ++i) {
      io_uring_cqe* cqe = nullptr;
      if (io_uring_wait_cqe(&ring_, &cqe) != 0) Die("io_uring_wait_cqe");
      if (cqe->res != 1) {
        std::fprintf(stderr, "io_uring: %s\n", std::strerror(-cqe->res));
        std::exit(1);
      }
      io_uring_cqe_seen(&ring_, cqe);
    }
  }

 private:
  const Mode mode_;
  io_uring ring_{};
  char out_ = 1;
  char in_ = 0;
};

// A middle thread: takes each operation from `upstream`, hands it to
// `downstream` (when there is one) and its answer back; `iterations` times.
void Middle(Mode mode, int upstream, int downstream, int iterations) {
  Hop hop(mode);
  hop.Receive(upstream);
  for (int i = 0; i < iterations; ++i) {
    if (downstream >= 0) hop.SendThenReceive(downstream, downstream);
    if (i + 1 < iterations) {
      hop.SendThenReceive(upstream, upstream);
    } else {
      hop.Send(upstream);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: rdmad_handoff_pingpong write-read|uring ITERATIONS "
                 "[SLICE_US]\n");
    return 2;
  }
  const std::string mode_name = argv[1];
  if (mode_name != "write-read" && mode_name != "uring") {
    std::fprintf(stderr, "mode '%s': use write-read or uring\n", argv[1]);
    return 2;
  }
  const Mode mode = mode_name == "uring" ? Mode::kUring : Mode::kWriteRead;
  const int iterations = std::atoi(argv[2]);
  if (iterations < 1) {
    std::fprintf(stderr, "ITERATIONS must be at least 1\n");
    return 2;
  }
  // Threads made after this inherit the slice.
  if (const int slice_us = argc > 3 ? std::atoi(argv[3]) : 0; slice_us > 0) {
    if (absl::Status s = rdmad::runtime::RequestSchedulerSlice(
            absl::Microseconds(slice_us));
        !s.ok()) {
      std::fprintf(stderr, "slice: %s\n", s.ToString().c_str());
      return 1;
    }
  }

  int client_engine[2];
  int engine_loop[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, client_engine) != 0 ||
      socketpair(AF_UNIX, SOCK_STREAM, 0, engine_loop) != 0) {
    Die("socketpair");
  }
  std::thread engine(Middle, mode, client_engine[1], engine_loop[0],
                     iterations);
  std::thread loop(Middle, mode, engine_loop[1], -1, iterations);

  std::vector<double> round_trips_us(iterations);
  {
    Hop hop(mode);
    for (int i = 0; i < iterations; ++i) {
      const auto start = std::chrono::steady_clock::now();
      hop.SendThenReceive(client_engine[0], client_engine[0]);
      round_trips_us[i] = std::chrono::duration<double, std::micro>(
                              std::chrono::steady_clock::now() - start)
                              .count();
    }
  }
  engine.join();
  loop.join();
  std::sort(round_trips_us.begin(), round_trips_us.end());
  const auto at = [&](double fraction) {
    return round_trips_us[static_cast<size_t>(fraction * (iterations - 1))];
  };
  std::printf("{\"mode\": \"%s\", \"p50_us\": %.1f, \"p99_us\": %.1f, "
              "\"p999_us\": %.1f}\n",
              mode_name.c_str(), at(0.5), at(0.99), at(0.999));
  return 0;
}
