// HandshakeAdmission: at most `max_in_flight` handshakes at once, the rest
// waiting their turn in order, so that a thousand peers coming up together
// are served in waves instead of all at once.
//
// Why: a handshake costs CPU on both sides (a gRPC channel, QPs to create
// and move to RTR and RTS). Started all at once, a thousand of them share
// the cores a thousand ways and every one finishes late: in a storm seen
// elsewhere, 240 concurrent handshakes took 96 s, longer than the QPs'
// retry window, and left half the QPs at zero throughput. Admitted a few
// dozen at a time, each takes what one takes and the last one is done
// sooner. A daemon keeps one admission for the handshakes it starts
// (initiator) and one for those it answers (responder).
//
// A waiter is granted a Ticket (its slot, returned when the Ticket is
// destroyed), in the order Enter was called; or, at its deadline while
// still waiting, or at once when `max_queued` already wait, it is told to
// retry (RESOURCE_EXHAUSTED, saying how busy). Nothing waits past its
// deadline, and nothing runs more than max_in_flight at once.
//
// Grants run on the thread that returned a slot (or in Enter), outside the
// lock; a grant that returns its own slot at once does not recurse (grants
// made meanwhile run after it, on the same thread). Thread-safe.
//
// Example (the serving side):
//   admission.Enter(DeadlineOf(context), [=](auto ticket) {
//     if (!ticket.ok()) return reactor->Finish(ToGrpcStatus(ticket.status()));
//     Serve(request, response);  // *ticket is returned when it goes
//     reactor->Finish(grpc::Status::OK);
//   });
#ifndef RDMAD_DAEMON_PEER_HANDSHAKE_ADMISSION_H_
#define RDMAD_DAEMON_PEER_HANDSHAKE_ADMISSION_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/runtime/timers.h"

namespace rdmad::peer {

struct HandshakeAdmissionOptions {
  std::string role;  // "initiator" or "responder", for messages
  size_t max_in_flight = 32;
  // Most waiting at once; more are told to retry at once.
  size_t max_queued = 1024;
  // For this long after the admission is made (the daemon's start), each
  // waiter enters after a random delay of up to cold_start_jitter: daemons
  // started together, each with the same peers to reach, then do not all
  // call each other in the same millisecond.
  absl::Duration cold_start = absl::ZeroDuration();
  absl::Duration cold_start_jitter = absl::ZeroDuration();
};

// What the admission did so far, for metrics and tests.
struct HandshakeAdmissionStats {
  size_t in_flight = 0;
  size_t queued = 0;
  size_t peak_in_flight = 0;
  size_t peak_queued = 0;
  uint64_t admitted = 0;  // granted a ticket
  uint64_t waited = 0;    // of those, after waiting their turn
  uint64_t refused = 0;   // told to retry: the queue was full
  uint64_t expired = 0;   // told to retry: their deadline came first
};

class HandshakeAdmission {
 private:
  struct Shared;

 public:
  // A slot: returned when destroyed (or moved from and reset).
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&&) noexcept = default;
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket();
    bool held() const { return shared_ != nullptr; }
    void Return();

   private:
    friend class HandshakeAdmission;
    explicit Ticket(std::shared_ptr<Shared> shared)
        : shared_(std::move(shared)) {}
    std::shared_ptr<Shared> shared_;
  };
  using Grant = absl::AnyInvocable<void(absl::StatusOr<Ticket>)>;

  // `timers` (not owned, outlives the admission) fires the deadlines of
  // waiters.
  HandshakeAdmission(HandshakeAdmissionOptions options,
                     runtime::Timers* timers);
  ~HandshakeAdmission();  // Shutdown()

  HandshakeAdmission(const HandshakeAdmission&) = delete;
  HandshakeAdmission& operator=(const HandshakeAdmission&) = delete;

  // Calls `grant` exactly once: with a Ticket when a slot is free (now, or
  // after those that entered before), or with RESOURCE_EXHAUSTED when the
  // queue is full or `deadline` comes first. During the cold start, after
  // its jitter.
  void Enter(absl::Time deadline, Grant grant);

  // Tells those still waiting to retry (UNAVAILABLE: shutting down) and
  // refuses new ones. Idempotent; the destructor calls it.
  void Shutdown();

  HandshakeAdmissionStats stats() const;
  const HandshakeAdmissionOptions& options() const;

 private:
  static void EnterNow(const std::shared_ptr<Shared>& shared,
                       absl::Time deadline, Grant grant);

  std::shared_ptr<Shared> shared_;
  const absl::Time cold_until_;
};

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_HANDSHAKE_ADMISSION_H_
