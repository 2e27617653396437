// libFuzzer target: what a client can write into its shared-memory queue.
// The input is a script of records, each an action on the segment as a
// hostile client would do it (write a submission entry of arbitrary bytes,
// scribble a slot's sequence, the tail or the completion head) followed by
// one round of what the daemon's engine does: take entries
// (RingQueue::Take, which checks the client's sequences and head), decode
// them (ring_decoder) and run the valid ones through the TransferEngine
// against a region table, local copies for real (each both as the engine
// runs it, TransferEngine::CopyNow, and through the batch path: they must
// decide the same), then publish the completions, and look before sleeping (which checks the tail). A memory
// error, a crash or a completion for an entry never taken is a bug.
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "common/queue_ring.h"
#include "daemon/core/region_table.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/ring/ring_decoder.h"
#include "daemon/ring/ring_queue.h"

namespace {

using namespace rdmad;

constexpr core::Caller kOwner{1, 1000, 100, 1, {}};

struct World {
  core::NullRegistrar registrar;
  core::RegionTable regions{&registrar, core::RegionLimits{64 << 20, 1 << 30}};
  core::TransferEngine engine{&regions, nullptr};
  std::shared_ptr<ring::RemoteHandles> handles =
      std::make_shared<ring::RemoteHandles>();
  core::RegionCache cache;  // the queue's, kept across rounds

  World() {
    for (const auto& [name, size] :
         {std::pair<const char*, uint64_t>{"a", 4096}, {"b", 100}}) {
      core::AllocateOptions o;
      o.name = name;
      o.size = size;
      o.daemon_owned = true;
      o.export_access = core::RemoteAccess::kReadWrite;
      if (!regions.Allocate(kOwner, o).ok()) std::abort();
    }
    core::AllocateOptions buffer;
    buffer.size = 8192;
    if (!regions.Allocate(kOwner, buffer).ok()) std::abort();
    ring::RemoteHandle local;
    local.target.name = "a";
    local.size = 4096;
    local.access = core::RemoteAccess::kReadWrite;
    ring::RemoteHandle remote;  // no transport in here: FAILED_PRECONDITION
    remote.target.peer = "10.0.0.2:7471";
    remote.target.name = "kv";
    remote.size = 1 << 20;
    remote.access = core::RemoteAccess::kReadWrite;
    if (!handles->Add(local).ok() || !handles->Add(remote).ok()) std::abort();
  }
};

struct Record {
  uint32_t action;
  uint32_t value;
  queue::SubmissionEntry entry;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();
  ring::RingQueueOptions options;
  options.submission_entries = 8;
  options.completion_entries = 8;
  auto made = ring::RingQueue::Create(1, kOwner, world->handles, options);
  if (!made.ok()) std::abort();
  std::shared_ptr<ring::RingQueue> queue = *made;
  void* client = ::mmap(nullptr, queue->segment_size(), PROT_READ | PROT_WRITE,
                        MAP_SHARED, queue->segment_fd(), 0);
  if (client == MAP_FAILED) std::abort();
  auto* header = static_cast<queue::QueueHeader*>(client);
  auto* ring = reinterpret_cast<queue::SubmissionEntry*>(
      static_cast<char*>(client) + queue->geometry().sq_offset);
  queue::CompletionConsumer reaper(client);
  uint32_t tail = 0;  // the next position this client writes
  uint32_t taken_total = 0, completed_total = 0;
  for (size_t at = 0; at + sizeof(Record) <= size; at += sizeof(Record)) {
    Record r;
    std::memcpy(&r, data + at, sizeof(r));
    // Every entry is also decoded on its own. DecodeEntry's inline checks
    // and DescribeBadEntry must agree: an entry refused by one and passed by
    // the other would be "failed an unknown check" (INTERNAL).
    if (absl::IsInternal(ring::DecodeSubmission(r.entry, *world->handles,
                                                absl::Now(), absl::Seconds(1))
                             .status())) {
      std::abort();
    }
    switch (r.action % 5) {
      case 0:  // a submission, published the way the library does
        // (its sequence too, unless the value's low bit keeps the fuzzed
        // one: impossible sequences stop the queue)
        ring[tail & 7] = r.entry;
        if ((r.value & 1) == 0) ring[tail & 7].sequence = tail + 1;
        ++tail;
        header->sq_tail.store(tail);
        break;
      case 1:  // any sequence into any slot
        ring[r.value & 7].sequence = r.entry.tag & 0xffffffff;
        break;
      case 2:
        header->cq_head.store(r.value);
        break;
      case 3: {  // the client consumes what was published
        queue::CompletionEntry done[8];
        while (reaper.Poll(absl::MakeSpan(done)) > 0) {
        }
        break;
      }
      case 4:
        header->sq_tail.store(r.value);
        break;
    }
    // One engine round.
    queue::SubmissionEntry entries[8];
    const size_t n = queue->Take(absl::MakeSpan(entries));
    taken_total += n;
    std::vector<core::TransferRequest> batch;
    for (size_t i = 0; i < n; ++i) {
      auto spec = ring::DecodeSubmission(entries[i], *world->handles,
                                         absl::Now(), absl::Seconds(1));
      const uint64_t tag = entries[i].tag;
      if (!spec.ok()) {
        ++completed_total;
        queue->Complete(tag, spec.status(), 0, core::TransportKind::kNone);
        continue;
      }
      // A region of this daemon: as the engine copies it (CopyNow), and
      // also through the batch path, which must decide the same.
      const std::shared_ptr<const ring::RemoteHandle> handle =
          world->handles->Find(entries[i].remote_handle);
      if (handle != nullptr && handle->target.is_local()) {
        ring::DecodedEntry decoded;
        if (!ring::DecodeEntry(entries[i], handle.get(), &decoded).ok()) {
          std::abort();  // DecodeSubmission accepted it
        }
        auto now = world->engine.CopyNow(
            kOwner, ring::ToLocalCopy(decoded, *handle), TickClock::Now(),
            world->cache);
        if (!now.has_value()) std::abort();  // no directory here
        std::optional<absl::Status> batched;
        world->engine.Submit(kOwner, *spec,
                             [&batched](absl::StatusOr<core::TransferResult> r) {
                               batched = r.status();
                             });
        if (!batched.has_value() || batched->code() != now->status().code()) {
          std::abort();
        }
        ++completed_total;
        queue->Complete(tag, now->status(), now->ok() ? (*now)->bytes : 0,
                        core::TransportKind::kLocal);
        continue;
      }
      batch.push_back({*std::move(spec),
                       [queue, tag, &completed_total](
                           absl::StatusOr<core::TransferResult> result) {
                         ++completed_total;
                         queue->Complete(tag, result.status(),
                                         result.ok() ? result->bytes : 0,
                                         core::TransportKind::kLocal);
                       }});
    }
    world->engine.SubmitBatch(kOwner, absl::MakeSpan(batch));
    if (completed_total != taken_total) std::abort();  // all run inline here
    // The engine's look before sleeping (which reads the tail).
    if (queue->SleepUnlessWork() == ring::RingQueue::SleepCheck::kWork ||
        (r.action & 0x100) != 0) {
      queue->Awake();
    }
  }
  ::munmap(client, queue->segment_size());
  return 0;
}
