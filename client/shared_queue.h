// SharedQueue: the queue behind Client::Write, Read and Batch. Those calls
// may come from many threads at once, so this wraps one rdmad::Queue with a
// lock for submitting and a rule for waiting: one waiting thread at a time
// polls the ring and hands each completion to the thread that waits for its
// tag. It also remembers a remote handle per remote region named, so that
// only the first transfer to a region pays for OpenRemote (the daemon
// follows a region named by name itself when it is re-exported or its
// daemon restarts). When the local daemon restarts, the client's session
// changes (Client::Run opens the new one): the queue and the handles of
// the old session are replaced on first use. Not a public header.
#ifndef RDMAD_CLIENT_SHARED_QUEUE_H_
#define RDMAD_CLIENT_SHARED_QUEUE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"

namespace rdmad::client_internal {

class SharedQueue {
 public:
  // `client` is not owned and outlives this.
  explicit SharedQueue(Client* client) : client_(client) {}

  // Outcomes kept for a thread that has not collected them yet, and tags
  // whose outcome is to be dropped: both go back to 0 when no transfer
  // runs (for tests).
  size_t KeptForTest();

  // Runs `ops` (checked by Client::PrepareToRun: each has a buffer and a
  // remote region; one named by RemoteRegion is opened here) within
  // `timeout` and returns a completion per op, with its tag. A failed call
  // (no queue, daemon gone) is the whole call's status.
  absl::StatusOr<std::vector<Completion>> Run(absl::Span<const Op> ops,
                                              absl::Duration timeout);

 private:
  absl::Status EnsureQueue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(submit_mu_);
  // The handle for `remote` (opened on first use).
  absl::StatusOr<std::shared_ptr<const RemoteHandle>> HandleFor(
      const RemoteRegion& remote);
  // Submits `ops` and waits for all of their outcomes.
  absl::StatusOr<std::vector<Completion>> Execute(std::vector<Op>& ops,
                                                  absl::Time deadline);
  // Waits for the outcome of `tag`, polling the ring when no one else is.
  absl::StatusOr<Completion> Await(uint64_t tag, absl::Time deadline);
  // The caller stopped waiting for ops[from, to) (it gave up at its
  // deadline or the queue failed): their outcomes, already here or still
  // to come, are dropped instead of kept for good.
  void Abandon(const std::vector<Op>& ops, size_t from, size_t to);

  Client* const client_;  // Not owned.

  absl::Mutex submit_mu_;
  // Shared: a waiting thread keeps the one it waits on.
  std::shared_ptr<Queue> queue_ ABSL_GUARDED_BY(submit_mu_);
  uint64_t next_tag_ ABSL_GUARDED_BY(submit_mu_) = 1;

  absl::Mutex handles_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const RemoteHandle>>
      handles_ ABSL_GUARDED_BY(handles_mu_);

  absl::Mutex results_mu_;
  absl::flat_hash_map<uint64_t, Completion> results_
      ABSL_GUARDED_BY(results_mu_);
  // Tags of the current queue that nobody waits for any more.
  absl::flat_hash_set<uint64_t> abandoned_ ABSL_GUARDED_BY(results_mu_);
  bool polling_ ABSL_GUARDED_BY(results_mu_) = false;
  absl::CondVar results_cv_;
};

}  // namespace rdmad::client_internal

#endif  // RDMAD_CLIENT_SHARED_QUEUE_H_
