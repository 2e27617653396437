// Moves an engine thread off its CPU when a client keeps waiting on that
// same CPU while it could run elsewhere.
//
// A client whose engine runs on its CPU polls between sched_yield calls,
// and the engine yields back after each round (common/queue_layout.h): an
// 8-byte op then costs two context switches, some 5 us instead of 0.4. The
// scheduler put them together (it wakes a sleeper on its waker's CPU) and,
// on the machines measured, does not move them apart again: both threads
// run all the time, so its load balancing counts both as cache-hot and
// leaves them where they are, while the other CPU idles.
//
// So the engine steps aside: after kYieldsBeforeMove such yields within
// kWindow, it takes its own CPU out of its affinity and puts the affinity
// back at once (the kernel migrates a thread whose CPU leaves its mask,
// and does not move it back when the mask is restored). The affinity it
// restores is the one it read, so a CPUAffinity= of the unit or a cpuset
// still holds; a thread allowed one CPU only never moves.
//
// It may have to step aside again soon: an engine that sleeps is woken on
// its client's CPU, and then the pause before a move is kFirstPause. But
// needing to move again without having slept says clients wait on every
// CPU it can go to: then each pause doubles (up to kMaxPause), so that
// such an engine does not chase them. Loop thread only.
#ifndef RDMAD_DAEMON_RING_CPU_STEP_ASIDE_H_
#define RDMAD_DAEMON_RING_CPU_STEP_ASIDE_H_

#include <cstdint>

#include "absl/time/time.h"

namespace rdmad::ring {

class CpuStepAside {
 public:
  // How it moves the calling thread off a CPU: MoveOff, or a stand-in.
  using MoveOffFn = bool (*)(int cpu);

  explicit CpuStepAside(MoveOffFn move_off = &MoveOff) : move_off_(move_off) {}

  static constexpr int kYieldsBeforeMove = 64;
  static constexpr absl::Duration kWindow = absl::Milliseconds(20);
  static constexpr absl::Duration kFirstPause = absl::Milliseconds(5);
  static constexpr absl::Duration kMaxPause = absl::Seconds(1);

  // The calling thread yielded to a client that waits on its CPU by
  // yielding (not asleep) at `now`. True if that made it move to another
  // CPU just now.
  bool Yielded(absl::Time now);

  // The thread slept (its loop had nothing to do) and was woken.
  void Slept() { slept_ = true; }

  // Times this thread moved, and the pause before the next move may be.
  uint64_t moves() const { return moves_; }
  absl::Duration pause() const { return pause_; }

  // Takes the calling thread off CPU `cpu` (keeping the rest of its
  // affinity): true if it moved. False when `cpu` is the only CPU it may
  // use, or the kernel refused.
  static bool MoveOff(int cpu);

 private:
  const MoveOffFn move_off_;
  int yields_ = 0;
  absl::Time window_start_ = absl::InfinitePast();
  absl::Time last_move_ = absl::InfinitePast();
  absl::Duration pause_ = kFirstPause;
  bool slept_ = true;  // since the last move
  uint64_t moves_ = 0;
};

}  // namespace rdmad::ring

#endif  // RDMAD_DAEMON_RING_CPU_STEP_ASIDE_H_
