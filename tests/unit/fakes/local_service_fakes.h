// Fakes of what the Local service calls beyond the tables it is given
// (service/local_service.h, LocalServiceDeps): client queues, the peer
// table's queries, and the questions it forwards to other daemons. Each
// answers at once, inline, from what the test set, and remembers what it
// was asked. Set them before the calls; a call's answer is read under a
// lock, since gRPC runs handlers on its own threads.
#ifndef RDMAD_TESTS_UNIT_FAKES_LOCAL_SERVICE_FAKES_H_
#define RDMAD_TESTS_UNIT_FAKES_LOCAL_SERVICE_FAKES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/peer/peer_queries.h"
#include "daemon/ring/queue_control.h"
#include "daemon/service/peer_inspector.h"

namespace rdmad::service::testing {

// Queues that exist only as what the test says: OpenQueue answers
// `opened` (its options are kept), Close finds the ids in `open_ids`,
// List returns `listed`, and each session gets real, empty RemoteHandles.
class FakeQueues final : public ring::QueueControl {
 public:
  absl::StatusOr<ring::OpenedQueue> OpenQueue(
      const core::Caller&, const ring::RingQueueOptions& options) override {
    absl::MutexLock lock(&mu_);
    asked_options_ = options;
    return opened;
  }
  absl::Status Close(uint64_t, uint64_t queue_id) override {
    absl::MutexLock lock(&mu_);
    for (auto it = open_ids.begin(); it != open_ids.end(); ++it) {
      if (*it == queue_id) {
        open_ids.erase(it);
        return absl::OkStatus();
      }
    }
    return absl::NotFoundError("no such queue");
  }
  absl::StatusOr<std::shared_ptr<ring::RemoteHandles>> HandlesOf(
      uint64_t session_id) override {
    absl::MutexLock lock(&mu_);
    auto& handles = handles_[session_id];
    if (handles == nullptr) handles = std::make_shared<ring::RemoteHandles>();
    return handles;
  }
  std::vector<ring::QueueSnapshot> List() const override { return listed; }

  // The handle `id` of `session_id`; null when it has none.
  std::shared_ptr<const ring::RemoteHandle> Handle(uint64_t session_id,
                                                   uint64_t id) const {
    absl::MutexLock lock(&mu_);
    auto it = handles_.find(session_id);
    return it == handles_.end() ? nullptr : it->second->Find(id);
  }
  ring::RingQueueOptions asked_options() const {
    absl::MutexLock lock(&mu_);
    return asked_options_;
  }

  absl::StatusOr<ring::OpenedQueue> opened = ring::OpenedQueue{};
  std::vector<uint64_t> open_ids;
  std::vector<ring::QueueSnapshot> listed;

 private:
  mutable absl::Mutex mu_;
  ring::RingQueueOptions asked_options_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::shared_ptr<ring::RemoteHandles>> handles_
      ABSL_GUARDED_BY(mu_);
};

// A peer table that knows `peers` and `connections`, and resolves every
// target to `resolved`, remembering the target and uid asked for.
class FakePeers final : public peer::PeerQueries {
 public:
  void Resolve(const core::TransferTarget& target, uint32_t uid, absl::Time,
               peer::Callback<peer::TransferFlow::Resolved> done) override {
    {
      absl::MutexLock lock(&mu_);
      asked_target_ = target;
      asked_uid_ = uid;
      ++resolves_;
    }
    done(resolved);
  }
  std::vector<peer::PeerSnapshot> ListPeers() const override { return peers; }
  std::vector<peer::ConnectionSnapshot> ListConnections() const override {
    return connections;
  }
  size_t size() const override { return peers.size(); }

  core::TransferTarget asked_target() const {
    absl::MutexLock lock(&mu_);
    return asked_target_;
  }
  uint32_t asked_uid() const {
    absl::MutexLock lock(&mu_);
    return asked_uid_;
  }
  int resolves() const {
    absl::MutexLock lock(&mu_);
    return resolves_;
  }

  absl::StatusOr<peer::TransferFlow::Resolved> resolved =
      absl::UnavailableError("no peer answers in this test");
  std::vector<peer::PeerSnapshot> peers;
  std::vector<peer::ConnectionSnapshot> connections;

 private:
  mutable absl::Mutex mu_;
  core::TransferTarget asked_target_ ABSL_GUARDED_BY(mu_);
  uint32_t asked_uid_ ABSL_GUARDED_BY(mu_) = 0;
  int resolves_ ABSL_GUARDED_BY(mu_) = 0;
};

// Other daemons as the test says they answer: ListExports with `exports`,
// Resolve with `resolve`; remembers the peer and the requests.
class FakeInspection final : public PeerInspection {
 public:
  void ListExports(const std::string& peer,
                   const v1::ListExportsRequest& request, absl::Time,
                   std::function<void(absl::StatusOr<v1::ListExportsResponse>)>
                       done) override {
    {
      absl::MutexLock lock(&mu_);
      asked_peer_ = peer;
      asked_list_ = request;
    }
    done(exports);
  }
  void Resolve(
      const std::string& peer, const v1::ResolveRequest& request, absl::Time,
      std::function<void(absl::StatusOr<v1::ResolveResponse>)> done) override {
    {
      absl::MutexLock lock(&mu_);
      asked_peer_ = peer;
      asked_resolve_ = request;
    }
    done(resolve);
  }

  std::string asked_peer() const {
    absl::MutexLock lock(&mu_);
    return asked_peer_;
  }
  v1::ListExportsRequest asked_list() const {
    absl::MutexLock lock(&mu_);
    return asked_list_;
  }
  v1::ResolveRequest asked_resolve() const {
    absl::MutexLock lock(&mu_);
    return asked_resolve_;
  }

  absl::StatusOr<v1::ListExportsResponse> exports =
      absl::UnavailableError("no peer answers in this test");
  absl::StatusOr<v1::ResolveResponse> resolve =
      absl::UnavailableError("no peer answers in this test");

 private:
  mutable absl::Mutex mu_;
  std::string asked_peer_ ABSL_GUARDED_BY(mu_);
  v1::ListExportsRequest asked_list_ ABSL_GUARDED_BY(mu_);
  v1::ResolveRequest asked_resolve_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::service::testing

#endif  // RDMAD_TESTS_UNIT_FAKES_LOCAL_SERVICE_FAKES_H_
