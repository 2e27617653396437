// AcceptBackoff: what a listener does when accept(2) fails for want of
// resources (EMFILE, ENFILE, ENOBUFS, ENOMEM).
//
// The connection that could not be accepted stays queued, so the listening
// socket stays readable: a poll loop that keeps watching it spins (seen: 90%
// of a core and 300,000 log lines a second while descriptors were gone).
// Instead the loop stops watching the listener for a while, doubling the
// pause from 10 ms up to 1 s while failures go on, and logs at most one line
// per interval saying how many failures it did not log.
//
// Example:
//   AcceptBackoff backoff;
//   // accept failed with EMFILE:
//   backoff.Failed(absl::Now());
//   if (auto skipped = backoff.TakeLogTurn(absl::Now())) log(..., *skipped);
//   // in the loop: watch the listener only if !backoff.Paused(absl::Now()),
//   // and wake up at backoff.resume_at() at the latest.
//
// Not thread-safe: owned by the loop thread.
#ifndef RDMAD_DAEMON_RUNTIME_ACCEPT_BACKOFF_H_
#define RDMAD_DAEMON_RUNTIME_ACCEPT_BACKOFF_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace rdmad::runtime {

class AcceptBackoff {
 public:
  static constexpr absl::Duration kFirstPause = absl::Milliseconds(10);
  static constexpr absl::Duration kLongestPause = absl::Seconds(1);
  static constexpr absl::Duration kLogInterval = absl::Seconds(10);

  // Whether accept(2) failing with `error` is a want of resources (the
  // connection stays queued: back off) rather than a transient or
  // per-connection failure (try the next one).
  static bool ShortOfResources(int error);
  // What to do about it, for the log line.
  static const char* Remedy(int error);

  // accept(2) on `listener` failed with `error` (a want of resources):
  // pauses (Failed) and logs, at most once per kLogInterval, what failed,
  // that `who` (e.g. "new clients") wait, and what to do about it.
  void FailedAndLog(int error, absl::string_view listener,
                    absl::string_view who);

  // An accept failed for want of resources at `now`: pauses the listener
  // (twice as long as the last pause, up to kLongestPause).
  void Failed(absl::Time now);
  // An accept succeeded: the next failure pauses briefly again.
  void Succeeded();

  bool Paused(absl::Time now) const { return now < resume_at_; }
  // The poll(2) timeout that ends the pause in time: -1 (none) when not
  // paused, else the milliseconds to resume_at(), rounded up.
  int PollTimeoutMs(absl::Time now) const;
  absl::Time resume_at() const { return resume_at_; }
  absl::Duration pause() const { return pause_; }

  // Whether the failure just recorded should be logged now: the number of
  // failures not logged since the last line, or nullopt (do not log).
  std::optional<uint64_t> TakeLogTurn(absl::Time now);

 private:
  absl::Duration pause_ = absl::ZeroDuration();
  absl::Time resume_at_ = absl::InfinitePast();
  absl::Time last_log_ = absl::InfinitePast();
  uint64_t unlogged_ = 0;
};

}  // namespace rdmad::runtime

#endif  // RDMAD_DAEMON_RUNTIME_ACCEPT_BACKOFF_H_
