// The two ends of each ring of a shared-memory queue (queue_layout.h says
// what the segment holds and who writes what). Each end keeps its own copy
// of the index it owns and only reads the other side's, so a misbehaving
// peer can make an end see an impossible index (reported as DATA_LOSS) but
// never make it read or write outside the ring.
//
//   client                              daemon
//   SubmissionProducer  -- entries -->  SubmissionConsumer
//   CompletionConsumer  <-- entries --  CompletionProducer
//
// None of these classes is thread-safe: each end is driven by one thread
// at a time (the daemon serializes its completion producer with a lock).
#ifndef RDMAD_COMMON_QUEUE_RING_H_
#define RDMAD_COMMON_QUEUE_RING_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/queue_layout.h"

namespace rdmad::queue {

// Checks a mapped segment of `size` bytes: magic, version, geometry inside
// it. DATA_LOSS naming what is wrong; FAILED_PRECONDITION for a layout
// version other than this build's (a library and a daemon of different
// releases).
absl::Status CheckSegment(const void* base, uint64_t size);

// An error message longer than an error slot holds (kErrorMessageSize) is
// cut to the part returned here, at a word's end where it can be, and kCut
// follows it in the slot.
inline constexpr absl::string_view kCut = "...";
absl::string_view FitErrorMessage(absl::string_view message);

// Writes a fresh header for `geometry` at `base` (the daemon, once).
void InitializeSegment(void* base, const Geometry& geometry);

// Client: appends submissions.
class SubmissionProducer {
 public:
  explicit SubmissionProducer(void* base);
  // Entries that can be pushed now.
  uint32_t Space();
  // At least min(want, Space()): reads the daemon's head (a cache line the
  // other core wrote) only when the head seen last leaves less than `want`.
  uint32_t Space(uint32_t want);
  // Writes `entry` (but its `sequence`) at the tail, not visible yet.
  // Space() must be > 0.
  void Push(const SubmissionEntry& entry);
  // Makes what was pushed visible (writes the entries' sequences, then the
  // tail). True if the engine may be asleep and needs the doorbell.
  bool Publish();

 private:
  QueueHeader* const header_;
  SubmissionEntry* const ring_;
  const uint32_t mask_;
  uint32_t tail_;       // the next position to push
  uint32_t published_;  // positions before it are visible
  uint32_t head_seen_;  // the daemon's head when last read
};

// Daemon: takes submissions. `geometry` is the daemon's own record of the
// segment it created: the copy in the shared header is the client's to
// scribble on, and is never read back.
class SubmissionConsumer {
 public:
  SubmissionConsumer(void* base, const Geometry& geometry);
  // Whether the next entry is there (its sequence says so), or DATA_LOSS
  // if the client wrote a sequence no entry of that slot can have.
  absl::StatusOr<bool> Ready() const;
  // Copies up to out.size() entries that are there out of the ring and
  // frees their slots; returns how many. The copies are the daemon's to
  // validate.
  absl::StatusOr<size_t> Take(absl::Span<SubmissionEntry> out);
  // Before sleeping: sets the sleeping flag, then says whether work arrived
  // meanwhile (then the caller clears the flag and goes on), or DATA_LOSS
  // if the client's tail is impossible: ahead by more than the ring holds,
  // or past an entry whose sequence says it was never written.
  absl::StatusOr<bool> SleepUnlessWork();
  // Sets the sleeping flag without looking for work (after SleepUnlessWork
  // found work the caller cannot take yet).
  void Asleep();
  void Awake();

 private:
  QueueHeader* const header_;
  // Where the entry of `position` stands: there, not written yet (its
  // slot holds the previous lap's sequence, or nothing on the first lap),
  // or impossible.
  enum class Slot { kReady, kNotYet, kCorrupt };
  Slot Look(uint32_t position, std::memory_order order) const;
  // DATA_LOSS for the corrupt slot of `position`.
  absl::Status Overwritten(uint32_t position) const;

  const SubmissionEntry* const ring_;
  const uint32_t entries_;
  uint32_t head_;
};

// Daemon: publishes completions (geometry as for SubmissionConsumer).
class CompletionProducer {
 public:
  CompletionProducer(void* base, const Geometry& geometry);
  // Slots the client has freed and not been given back: entries minus
  // those not consumed yet. DATA_LOSS if the client's head is impossible.
  absl::StatusOr<uint32_t> Space();
  // At least min(want, Space()): reads the client's head (a cache line the
  // other core wrote) only when the head seen last leaves less than `want`.
  // The head seen last was checked when read, so the slots it frees are
  // free; a lie told since is caught at the next read.
  absl::StatusOr<uint32_t> Space(uint32_t want);
  // Writes `entry` (its `error` field is set here; not its `sequence`)
  // and, for a failure, `message` into the error slot of its position; not
  // visible yet. Space() must be > 0.
  void Push(CompletionEntry entry, absl::string_view message);
  // Makes what was pushed visible (writes the entries' sequences, then the
  // tail). True if the client waits and needs the wake-up.
  bool Publish();

 private:
  // Writes `message` into the error slot `slot`; returns `slot`.
  uint32_t WriteMessage(uint32_t slot, absl::string_view message);

  QueueHeader* const header_;
  CompletionEntry* const ring_;
  ErrorSlot* const errors_;
  const uint32_t entries_;
  uint32_t tail_;
  uint32_t published_ = 0;  // positions before it are visible
  uint32_t head_seen_ = 0;  // the client's head when last read (checked)
};

// Client: reads completions.
class CompletionConsumer {
 public:
  explicit CompletionConsumer(void* base);
  // Copies up to out.size() completions (and, for failures, their messages
  // into `messages` when given, same positions); frees their slots.
  size_t Poll(absl::Span<CompletionEntry> out, std::string* messages = nullptr);
  // Before sleeping: sets the waiting flag (and says on which CPU) and says
  // whether completions are there already (then it is cleared again, and
  // the caller polls). Done: awake again, the client waits no more.
  bool WaitUnlessReady();
  void Done();
  bool Empty() const;
  // Says how the client waits for what it submitted (client_cpu), storing
  // only a change: the engine reads that line at every publish.
  //   NotWaiting: busy-polling on a CPU the engine is not on, or not
  //   waiting at all (Done says so too): nothing for the engine to yield
  //   to;
  //   Yielding: polling between sched_yield calls on this CPU, which the
  //   engine runs on too (it yields back after completing work).
  void NotWaiting() { Say(0); }
  void Yielding();

 private:
  // Copies the message of `entry`'s error slot (none: empty) into
  // `*message`.
  void CopyMessage(const CompletionEntry& entry, std::string* message) const;
  void Say(int32_t cpu_plus_one);

  QueueHeader* const header_;
  const CompletionEntry* const ring_;
  const ErrorSlot* const errors_;
  const uint32_t entries_;
  uint32_t head_;
  int32_t said_cpu_;  // what client_cpu holds: only this side writes it
};

// Which CPU each side runs on (queue_layout.h), as hints: a thread can
// move at any time, and the values are never used as indices.
//
// The client: true when the engine last said it runs on this thread's CPU
// (then spinning for a completion would only keep it from running).
bool EngineRunsHere(const void* base);
// The daemon: says which CPU the engine runs on (when it changes; -1:
// not known).
void SetEngineCpu(void* base, int cpu);
// The daemon: true when the client waits (asleep, or yielding) on this
// thread's CPU: then the engine should yield to it after completing work.
bool ClientWaitsHere(const void* base);

// The daemon: how many entries it holds for the queue's ring
// (QueueHeader::notifications_held).
void SetNotificationsHeld(void* base, size_t held);
// The client, after it freed room on the completion ring: true when the
// daemon holds notifications for it and the engine sleeps, so that the
// doorbell brings them at once (queue_layout.h).
inline bool HeldNotificationsWantDoorbell(const void* base);

// The queue's state as the daemon left it: OK while active, else the
// status it was stopped with.
inline absl::Status StopStatus(const void* base);
// StopStatus of a queue that is not active (its slow half).
absl::Status StoppedStatus(const void* base);
// Stops the queue (the daemon): it takes no more submissions.
void StopQueue(void* base, const absl::Status& why);

// --- Inline: what each side runs per operation. -------------------------

namespace ring_internal {

// The sequence a slot holds once the entry of `position` is in it.
inline uint32_t SubmissionSequence(uint32_t position) { return position + 1; }
inline uint64_t CompletionSequence(uint32_t position) {
  return uint64_t{position} + 1;
}

// The entries' sequences are read and written as atomics in place (the
// rest of an entry is plain memory ordered by them).
template <typename T>
T Load(const T& field, std::memory_order order) {
  return std::atomic_ref<T>(const_cast<T&>(field)).load(order);
}
template <typename T>
void Store(T& field, T value, std::memory_order order) {
  std::atomic_ref<T>(field).store(value, order);
}

}  // namespace ring_internal

inline uint32_t SubmissionProducer::Space(uint32_t want) {
  const uint32_t used = tail_ - head_seen_;
  if (used <= mask_ + 1 && mask_ + 1 - used >= want) return mask_ + 1 - used;
  return Space();
}

inline void SubmissionProducer::Push(const SubmissionEntry& entry) {
  std::memcpy(&ring_[tail_ & mask_], &entry,
              offsetof(SubmissionEntry, sequence));
  ++tail_;
}

inline bool SubmissionProducer::Publish() {
  for (; published_ != tail_; ++published_) {
    ring_internal::Store(ring_[published_ & mask_].sequence,
                         ring_internal::SubmissionSequence(published_),
                         std::memory_order_release);
  }
  // Sequentially consistent store, then load: pairs with the engine's
  // store of engine_sleeping and its look at sq_tail (SleepUnlessWork), so
  // one of the two sees the other. The engine polls the sequences, not the
  // tail, while it is awake: this line stays in this core's cache and the
  // store costs no transfer. (Not a fence between relaxed operations:
  // ThreadSanitizer does not understand fences.)
  header_->sq_tail.store(tail_, std::memory_order_seq_cst);
  return header_->engine_sleeping.load(std::memory_order_seq_cst) != 0;
}

inline SubmissionConsumer::Slot SubmissionConsumer::Look(
    uint32_t position, std::memory_order order) const {
  const uint32_t sequence =
      ring_internal::Load(ring_[position & (entries_ - 1)].sequence, order);
  if (sequence == ring_internal::SubmissionSequence(position)) {
    return Slot::kReady;
  }
  // Before the client writes it, a slot holds the entry one lap back (or,
  // on the first lap, the zeroes the daemon left).
  if (sequence == ring_internal::SubmissionSequence(position - entries_) ||
      (sequence == 0 && position < entries_)) {
    return Slot::kNotYet;
  }
  return Slot::kCorrupt;
}

inline absl::StatusOr<bool> SubmissionConsumer::Ready() const {
  switch (Look(head_, std::memory_order_acquire)) {
    case Slot::kReady:
      return true;
    case Slot::kNotYet:
      return false;
    case Slot::kCorrupt:
      break;
  }
  return Overwritten(head_);
}

inline absl::StatusOr<size_t> SubmissionConsumer::Take(
    absl::Span<SubmissionEntry> out) {
  size_t n = 0;
  for (; n < out.size(); ++n) {
    const uint32_t position = head_ + static_cast<uint32_t>(n);
    const Slot slot = Look(position, std::memory_order_acquire);
    if (slot == Slot::kNotYet) break;
    if (slot == Slot::kCorrupt) return Overwritten(position);
    // Copied before anything looks at it: the client may change the slot
    // at any moment.
    std::memcpy(&out[n], &ring_[position & (entries_ - 1)],
                sizeof(SubmissionEntry));
  }
  if (n == 0) return 0;
  head_ += static_cast<uint32_t>(n);
  header_->sq_head.store(head_, std::memory_order_release);
  return n;
}

inline absl::StatusOr<uint32_t> CompletionProducer::Space(uint32_t want) {
  // tail_ - head_seen_ <= entries_: head_seen_ was checked, and the tail
  // only moves within the space it gave.
  const uint32_t space = entries_ - (tail_ - head_seen_);
  if (space >= want) return space;
  return Space();
}

inline void CompletionProducer::Push(CompletionEntry entry,
                                     absl::string_view message) {
  const uint32_t slot = tail_ & (entries_ - 1);
  entry.error = message.empty() ? kNoError : WriteMessage(slot, message);
  std::memcpy(&ring_[slot], &entry, offsetof(CompletionEntry, sequence));
  ++tail_;
}

inline bool CompletionProducer::Publish() {
  const uint32_t mask = entries_ - 1;
  for (; published_ != tail_; ++published_) {
    ring_internal::Store(ring_[published_ & mask].sequence,
                         ring_internal::CompletionSequence(published_),
                         std::memory_order_release);
  }
  // Pairs with CompletionConsumer::WaitUnlessReady as the submission side
  // does (SubmissionProducer::Publish).
  header_->cq_tail.store(tail_, std::memory_order_seq_cst);
  return header_->client_waiting.load(std::memory_order_seq_cst) != 0;
}

inline bool HeldNotificationsWantDoorbell(const void* base) {
  const auto* h = static_cast<const QueueHeader*>(base);
  // A line the daemon writes only when its backlog changes.
  return h->notifications_held.load(std::memory_order_relaxed) != 0 &&
         h->engine_sleeping.load(std::memory_order_seq_cst) != 0;
}

inline absl::Status StopStatus(const void* base) {
  // Checked before every Submit: one load while the queue is active.
  if (static_cast<const QueueHeader*>(base)->state.load(
          std::memory_order_acquire) ==
      static_cast<uint32_t>(QueueState::kActive)) {
    return absl::OkStatus();
  }
  return StoppedStatus(base);
}

inline size_t CompletionConsumer::Poll(absl::Span<CompletionEntry> out,
                                       std::string* messages) {
  const size_t most = std::min<size_t>(out.size(), entries_);
  size_t n = 0;
  for (; n < most; ++n) {
    const uint32_t position = head_ + static_cast<uint32_t>(n);
    const uint32_t slot = position & (entries_ - 1);
    if (ring_internal::Load(ring_[slot].sequence, std::memory_order_acquire) !=
        ring_internal::CompletionSequence(position)) {
      break;
    }
    out[n] = ring_[slot];
    if (messages != nullptr) CopyMessage(out[n], &messages[n]);
  }
  if (n == 0) return 0;
  head_ += static_cast<uint32_t>(n);
  header_->cq_head.store(head_, std::memory_order_release);
  return n;
}

inline bool CompletionConsumer::Empty() const {
  return ring_internal::Load(ring_[head_ & (entries_ - 1)].sequence,
                             std::memory_order_acquire) !=
         ring_internal::CompletionSequence(head_);
}

}  // namespace rdmad::queue

#endif  // RDMAD_COMMON_QUEUE_RING_H_
