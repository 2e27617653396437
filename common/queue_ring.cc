#include "common/queue_ring.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace rdmad::queue {
namespace {

QueueHeader* Header(void* base) { return static_cast<QueueHeader*>(base); }

template <typename T>
T* At(void* base, uint64_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(base) + offset);
}

}  // namespace

using ring_internal::CompletionSequence;
using ring_internal::Load;
using ring_internal::Store;
using ring_internal::SubmissionSequence;

absl::Status CheckSegment(const void* base, uint64_t size) {
  if (size < kHeaderSize) {
    return absl::DataLossError(absl::StrCat(
        "queue segment of ", size, " bytes is smaller than its header"));
  }
  const auto* h = static_cast<const QueueHeader*>(base);
  if (h->magic != kMagic) {
    return absl::DataLossError("not an rdmad queue segment (magic)");
  }
  if (h->version != kVersion) {
    // Not corruption: a client library and a daemon of different releases.
    return absl::FailedPreconditionError(absl::StrCat(
        "rdmad's queues have layout version ", h->version,
        " and this client library speaks version ", kVersion,
        ": use the client library of the daemon's release"));
  }
  if (!IsPowerOfTwo(h->sq_entries) || !IsPowerOfTwo(h->cq_entries) ||
      h->sq_entries > kMaxEntries || h->cq_entries > kMaxEntries) {
    return absl::DataLossError("queue segment has impossible ring sizes");
  }
  const Geometry g = GeometryFor(h->sq_entries, h->cq_entries);
  if (h->sq_offset != g.sq_offset || h->cq_offset != g.cq_offset ||
      h->errors_offset != g.errors_offset || h->total_size != g.total_size ||
      g.total_size > size) {
    return absl::DataLossError("queue segment geometry does not add up");
  }
  return absl::OkStatus();
}

absl::string_view FitErrorMessage(absl::string_view message) {
  if (message.size() <= kErrorMessageSize) return message;
  absl::string_view head = message.substr(0, kErrorMessageSize - kCut.size());
  // At a word's end where there is one in the last third, and never inside
  // a UTF-8 sequence (a continuation byte is 10xxxxxx).
  const size_t space = head.rfind(' ');
  if (space != absl::string_view::npos && space >= head.size() * 2 / 3) {
    head = head.substr(0, space);
  } else {
    size_t end = head.size();
    while (end > 0 && (static_cast<uint8_t>(message[end]) & 0xC0) == 0x80) {
      --end;
    }
    head = head.substr(0, end);
  }
  while (!head.empty() && (head.back() == ' ' || head.back() == ',' ||
                           head.back() == ';' || head.back() == ':')) {
    head.remove_suffix(1);
  }
  return head;
}

void InitializeSegment(void* base, const Geometry& g) {
  std::memset(base, 0, g.total_size);
  QueueHeader* h = new (base) QueueHeader();
  h->magic = kMagic;
  h->version = kVersion;
  h->sq_entries = g.sq_entries;
  h->cq_entries = g.cq_entries;
  h->sq_offset = g.sq_offset;
  h->cq_offset = g.cq_offset;
  h->errors_offset = g.errors_offset;
  h->total_size = g.total_size;
  h->state.store(static_cast<uint32_t>(QueueState::kActive));
}

// --- client: submissions ----------------------------------------------------

SubmissionProducer::SubmissionProducer(void* base)
    : header_(Header(base)),
      ring_(At<SubmissionEntry>(base, Header(base)->sq_offset)),
      mask_(Header(base)->sq_entries - 1),
      tail_(0),
      published_(0),
      head_seen_(Header(base)->sq_head.load(std::memory_order_acquire)) {}

uint32_t SubmissionProducer::Space() {
  head_seen_ = header_->sq_head.load(std::memory_order_acquire);
  const uint32_t used = tail_ - head_seen_;
  return used > mask_ + 1 ? 0 : mask_ + 1 - used;
}

// --- daemon: submissions ----------------------------------------------------

SubmissionConsumer::SubmissionConsumer(void* base, const Geometry& g)
    : header_(Header(base)),
      ring_(At<SubmissionEntry>(base, g.sq_offset)),
      entries_(g.sq_entries),
      head_(0) {}

absl::Status SubmissionConsumer::Overwritten(uint32_t position) const {
  const uint32_t sequence = Load(ring_[position & (entries_ - 1)].sequence,
                                 std::memory_order_relaxed);
  return absl::DataLossError(absl::StrCat(
      "the submission ring's entry ", position, " has sequence ", sequence,
      ", which no entry of that slot can have (", SubmissionSequence(position),
      " when written, ", SubmissionSequence(position - entries_),
      " before): the queue's memory was overwritten"));
}

absl::StatusOr<bool> SubmissionConsumer::SleepUnlessWork() {
  // See SubmissionProducer::Publish.
  header_->engine_sleeping.store(1, std::memory_order_seq_cst);
  const uint32_t tail = header_->sq_tail.load(std::memory_order_seq_cst);
  bool work = false;
  // The engine takes entries as their sequences appear, so the tail,
  // published after them, may lag behind what was taken by up to a ring
  // (head_ - tail in 0..entries_); anything else claims entries not taken.
  if (head_ - tail > entries_) {
    if (tail - head_ > entries_) {
      return absl::DataLossError(absl::StrCat(
          "the submission ring's tail (", tail, ") is ", tail - head_,
          " entries ahead of what the daemon took (", head_,
          "), more than the ring holds (", entries_,
          "): the queue's memory was overwritten"));
    }
    // Having read the tail, the sequences written before it are visible.
    const Slot slot = Look(head_, std::memory_order_acquire);
    if (slot == Slot::kCorrupt) return Overwritten(head_);
    if (slot == Slot::kNotYet) {
      return absl::DataLossError(absl::StrCat(
          "the submission ring's tail (", tail, ") says entry ", head_,
          " was published, but its sequence says it was not: the queue's "
          "memory was overwritten"));
    }
    work = true;
  } else {
    // Published since the tail was read (or a corrupt slot, which Take
    // reports): work too.
    work = Look(head_, std::memory_order_acquire) != Slot::kNotYet;
  }
  if (work) header_->engine_sleeping.store(0, std::memory_order_relaxed);
  return work;
}

void SubmissionConsumer::Asleep() {
  header_->engine_sleeping.store(1, std::memory_order_seq_cst);
}

void SubmissionConsumer::Awake() {
  header_->engine_sleeping.store(0, std::memory_order_relaxed);
}

// --- daemon: completions ----------------------------------------------------

CompletionProducer::CompletionProducer(void* base, const Geometry& g)
    : header_(Header(base)),
      ring_(At<CompletionEntry>(base, g.cq_offset)),
      errors_(At<ErrorSlot>(base, g.errors_offset)),
      entries_(g.cq_entries),
      tail_(0) {}

absl::StatusOr<uint32_t> CompletionProducer::Space() {
  const uint32_t head = header_->cq_head.load(std::memory_order_acquire);
  const uint32_t used = tail_ - head;
  if (used > entries_) {
    return absl::DataLossError(absl::StrCat(
        "the completion ring's head (", head, ") is not within the ",
        entries_, " entries before the daemon's tail (", tail_,
        "): the queue's memory was overwritten"));
  }
  head_seen_ = head;
  return entries_ - used;
}

uint32_t CompletionProducer::WriteMessage(uint32_t slot,
                                          absl::string_view message) {
  ErrorSlot& e = errors_[slot];
  const absl::string_view fits = FitErrorMessage(message);
  std::memcpy(e.text, fits.data(), fits.size());
  size_t n = fits.size();
  if (fits.size() < message.size()) {
    // Said to be cut, not left to read as if it ended there.
    std::memcpy(e.text + n, kCut.data(), kCut.size());
    n += kCut.size();
  }
  e.length = static_cast<uint32_t>(n);
  return slot;
}

// --- client: completions ----------------------------------------------------

CompletionConsumer::CompletionConsumer(void* base)
    : header_(Header(base)),
      ring_(At<CompletionEntry>(base, Header(base)->cq_offset)),
      errors_(At<ErrorSlot>(base, Header(base)->errors_offset)),
      entries_(Header(base)->cq_entries),
      head_(Header(base)->cq_head.load(std::memory_order_relaxed)),
      said_cpu_(Header(base)->client_cpu.load(std::memory_order_relaxed)) {}

void CompletionConsumer::Say(int32_t cpu_plus_one) {
  if (cpu_plus_one == said_cpu_) return;
  said_cpu_ = cpu_plus_one;
  header_->client_cpu.store(cpu_plus_one, std::memory_order_relaxed);
}

void CompletionConsumer::Yielding() { Say(::sched_getcpu() + 1); }

void CompletionConsumer::CopyMessage(const CompletionEntry& entry,
                                     std::string* message) const {
  message->clear();
  if (entry.error < entries_) {
    const ErrorSlot& e = errors_[entry.error];
    message->assign(e.text, std::min<size_t>(e.length, kErrorMessageSize));
  }
}

bool CompletionConsumer::WaitUnlessReady() {
  // Stored even if unchanged: going to sleep costs more than the store.
  said_cpu_ = ::sched_getcpu() + 1;
  header_->client_cpu.store(said_cpu_, std::memory_order_relaxed);
  header_->client_waiting.store(1, std::memory_order_seq_cst);
  // Pairs with CompletionProducer::Publish. Completions polled through
  // their sequences may have taken head_ past the tail (signed compare).
  const uint32_t tail = header_->cq_tail.load(std::memory_order_seq_cst);
  if (static_cast<int32_t>(tail - head_) > 0 || !Empty() ||
      header_->state.load() != static_cast<uint32_t>(QueueState::kActive)) {
    Done();
    return true;
  }
  return false;
}

void CompletionConsumer::Done() {
  header_->client_waiting.store(0, std::memory_order_relaxed);
  // Awake, it is not to be yielded to: the engine reads client_cpu at
  // every publish, not only while the client waits.
  NotWaiting();
}

bool EngineRunsHere(const void* base) {
  const int32_t engine =
      static_cast<const QueueHeader*>(base)->engine_cpu.load(
          std::memory_order_relaxed);
  return engine != 0 && engine == ::sched_getcpu() + 1;
}

void SetEngineCpu(void* base, int cpu) {
  Header(base)->engine_cpu.store(cpu < 0 ? 0 : cpu + 1,
                                 std::memory_order_relaxed);
}

void SetNotificationsHeld(void* base, size_t held) {
  Header(base)->notifications_held.store(
      static_cast<uint32_t>(std::min<size_t>(held, UINT32_MAX)),
      std::memory_order_relaxed);
}

bool ClientWaitsHere(const void* base) {
  const int32_t client =
      static_cast<const QueueHeader*>(base)->client_cpu.load(
          std::memory_order_relaxed);
  return client != 0 && client == ::sched_getcpu() + 1;
}

absl::Status StoppedStatus(const void* base) {
  const auto* h = static_cast<const QueueHeader*>(base);
  const size_t n = ::strnlen(h->stop_message, kErrorMessageSize);
  int code = h->stop_code;
  if (code <= 0 || code > 16) code = static_cast<int>(absl::StatusCode::kUnknown);
  return absl::Status(static_cast<absl::StatusCode>(code),
                      absl::string_view(h->stop_message, n));
}

void StopQueue(void* base, const absl::Status& why) {
  QueueHeader* h = Header(base);
  h->stop_code = static_cast<int32_t>(why.code());
  const size_t n = std::min(why.message().size(), kErrorMessageSize - 1);
  std::memcpy(h->stop_message, why.message().data(), n);
  h->stop_message[n] = '\0';
  h->state.store(static_cast<uint32_t>(QueueState::kStopped),
                 std::memory_order_release);
}

}  // namespace rdmad::queue
