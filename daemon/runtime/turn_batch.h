// TurnBatch: work that many events of one event-loop turn would each do
// (publish a completion ring's tail, wake the client asleep on it), done
// once at the end of the turn instead.
//
// The event loop opens a TurnBatch::Scope around the callbacks, tasks and
// timers of each turn. A component that would publish something to
// another thread calls Defer() with itself while a scope is active on its
// thread, does the cheap part now (e.g. writes the entry), and is flushed
// once when the outermost scope closes: twenty completions read from one
// socket in one turn then cost the client one wake-up, not twenty.
//
// Thread-compatible by construction: every scope and its list of deferred
// work belongs to the thread that opened it.
#ifndef RDMAD_DAEMON_RUNTIME_TURN_BATCH_H_
#define RDMAD_DAEMON_RUNTIME_TURN_BATCH_H_

#include <memory>

namespace rdmad::runtime {

// What a deferral flushes. Held by shared_ptr until flushed, so an object
// whose last other owner lets go during the turn still gets its flush.
class TurnDeferred {
 public:
  virtual ~TurnDeferred() = default;
  // Runs once at the end of the turn in which Defer named this object (on
  // the same thread, with no scope active: a flush that defers again
  // runs that at once).
  virtual void FlushTurn() = 0;
};

class TurnBatch {
 public:
  // Opens a batch on this thread; nested scopes join the outermost one,
  // which flushes everything deferred when it closes.
  class Scope {
   public:
    Scope();
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

  // Whether a scope is open on this thread: only then does Defer defer.
  static bool Active();
  // Registers `what` to be flushed when this thread's outermost scope
  // closes; once per turn however often it is named. Returns false (and
  // registers nothing) when no scope is active: the caller flushes itself.
  static bool Defer(std::shared_ptr<TurnDeferred> what);
};

}  // namespace rdmad::runtime

#endif  // RDMAD_DAEMON_RUNTIME_TURN_BATCH_H_
