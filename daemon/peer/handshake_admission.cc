#include "daemon/peer/handshake_admission.h"

#include <algorithm>
#include <deque>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace rdmad::peer {

struct HandshakeAdmission::Shared {
  Shared(HandshakeAdmissionOptions o, runtime::Timers* t)
      : options(std::move(o)), timers(t) {
    options.max_in_flight = std::max<size_t>(1, options.max_in_flight);
  }

  struct Waiter {
    uint64_t id = 0;
    uint64_t timer = 0;
    Grant grant;
  };

  absl::Status Busy(absl::string_view why) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "handshakes as ", options.role, " are busy (", stats.in_flight,
        " in flight, at most ", options.max_in_flight, "; ", queue.size(),
        " waiting): ", why, "; retry shortly"));
  }

  HandshakeAdmissionOptions options;
  runtime::Timers* const timers;  // Not owned.
  mutable absl::Mutex mu;
  std::list<Waiter> queue ABSL_GUARDED_BY(mu);
  HandshakeAdmissionStats stats ABSL_GUARDED_BY(mu);
  uint64_t next_id ABSL_GUARDED_BY(mu) = 1;
  bool shut_down ABSL_GUARDED_BY(mu) = false;
};

namespace {

using Grant = HandshakeAdmission::Grant;
using Ticket = HandshakeAdmission::Ticket;
using Granted = std::pair<Grant, absl::StatusOr<Ticket>>;

// Grants made while a grant runs on this thread: run after it, by the
// outermost RunGrants, so that a grant returning its slot at once (which
// grants the next waiter) does not recurse once per waiter.
thread_local std::deque<Granted>* t_granting = nullptr;

void RunGrants(std::vector<Granted> grants) {
  if (t_granting != nullptr) {
    for (Granted& g : grants) t_granting->push_back(std::move(g));
    return;
  }
  std::deque<Granted> pending(std::make_move_iterator(grants.begin()),
                              std::make_move_iterator(grants.end()));
  t_granting = &pending;
  while (!pending.empty()) {
    Granted g = std::move(pending.front());
    pending.pop_front();
    g.first(std::move(g.second));
  }
  t_granting = nullptr;
}

}  // namespace

HandshakeAdmission::Ticket& HandshakeAdmission::Ticket::operator=(
    Ticket&& other) noexcept {
  if (this != &other) {
    Return();
    shared_ = std::move(other.shared_);
  }
  return *this;
}

HandshakeAdmission::Ticket::~Ticket() { Return(); }

void HandshakeAdmission::Ticket::Return() {
  std::shared_ptr<Shared> shared = std::move(shared_);
  shared_ = nullptr;
  if (shared == nullptr) return;
  std::vector<Granted> grants;
  std::vector<uint64_t> timers;
  {
    absl::MutexLock lock(&shared->mu);
    --shared->stats.in_flight;
    while (shared->stats.in_flight < shared->options.max_in_flight &&
           !shared->queue.empty()) {
      Shared::Waiter w = std::move(shared->queue.front());
      shared->queue.pop_front();
      if (w.timer != 0) timers.push_back(w.timer);
      ++shared->stats.in_flight;
      ++shared->stats.admitted;
      ++shared->stats.waited;
      shared->stats.peak_in_flight =
          std::max(shared->stats.peak_in_flight, shared->stats.in_flight);
      grants.emplace_back(std::move(w.grant), Ticket(shared));
    }
    shared->stats.queued = shared->queue.size();
  }
  for (uint64_t id : timers) shared->timers->Cancel(id);
  RunGrants(std::move(grants));
}

HandshakeAdmission::HandshakeAdmission(HandshakeAdmissionOptions options,
                                       runtime::Timers* timers)
    : shared_(std::make_shared<Shared>(std::move(options), timers)),
      cold_until_(timers->Now() + shared_->options.cold_start) {}

HandshakeAdmission::~HandshakeAdmission() { Shutdown(); }

void HandshakeAdmission::Shutdown() {
  std::vector<Granted> grants;
  std::vector<uint64_t> timers;
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->shut_down = true;
    for (Shared::Waiter& w : shared_->queue) {
      if (w.timer != 0) timers.push_back(w.timer);
      grants.emplace_back(
          std::move(w.grant),
          absl::UnavailableError("this daemon is shutting down"));
    }
    shared_->queue.clear();
    shared_->stats.queued = 0;
  }
  for (uint64_t id : timers) shared_->timers->Cancel(id);
  RunGrants(std::move(grants));
}

void HandshakeAdmission::Enter(absl::Time deadline, Grant grant) {
  runtime::Timers* timers = shared_->timers;
  const absl::Duration jitter = shared_->options.cold_start_jitter;
  if (jitter <= absl::ZeroDuration() || timers->Now() >= cold_until_) {
    return EnterNow(shared_, deadline, std::move(grant));
  }
  thread_local std::minstd_rand random(std::random_device{}());
  const double share = std::uniform_real_distribution<double>(0, 1)(random);
  // The admission may be gone when the timer fires (shutdown): then the
  // grant is told so, as a waiter would be.
  auto pending = std::make_shared<Grant>(std::move(grant));
  std::weak_ptr<Shared> weak = shared_;
  timers->RunAt(timers->Now() + jitter * share, [weak, deadline, pending] {
    std::shared_ptr<Shared> shared = weak.lock();
    if (shared == nullptr) {
      return (*pending)(absl::UnavailableError("this daemon is shutting down"));
    }
    EnterNow(shared, deadline, std::move(*pending));
  });
}

void HandshakeAdmission::EnterNow(const std::shared_ptr<Shared>& shared,
                                  absl::Time deadline, Grant grant) {
  std::vector<Granted> grants;
  {
    absl::MutexLock lock(&shared->mu);
    HandshakeAdmissionStats& s = shared->stats;
    if (shared->shut_down) {
      grants.emplace_back(
          std::move(grant),
          absl::UnavailableError("this daemon is shutting down"));
    } else if (s.in_flight < shared->options.max_in_flight &&
               shared->queue.empty()) {
      ++s.in_flight;
      ++s.admitted;
      s.peak_in_flight = std::max(s.peak_in_flight, s.in_flight);
      grants.emplace_back(std::move(grant), Ticket(shared));
    } else if (shared->queue.size() >= shared->options.max_queued) {
      ++s.refused;
      grants.emplace_back(std::move(grant), shared->Busy("no room to wait"));
    } else {
      Shared::Waiter& w = shared->queue.emplace_back();
      w.id = shared->next_id++;
      w.grant = std::move(grant);
      s.queued = shared->queue.size();
      s.peak_queued = std::max(s.peak_queued, s.queued);
      if (deadline != absl::InfiniteFuture()) {
        std::weak_ptr<Shared> weak = shared;
        w.timer = shared->timers->RunAt(deadline, [weak, id = w.id] {
          std::shared_ptr<Shared> alive = weak.lock();
          if (alive == nullptr) return;
          std::vector<Granted> expired;
          {
            absl::MutexLock lock(&alive->mu);
            for (auto it = alive->queue.begin(); it != alive->queue.end();
                 ++it) {
              if (it->id != id) continue;
              Grant g = std::move(it->grant);
              alive->queue.erase(it);
              ++alive->stats.expired;
              alive->stats.queued = alive->queue.size();
              expired.emplace_back(
                  std::move(g),
                  alive->Busy("the call's deadline came before its turn"));
              break;
            }
          }
          RunGrants(std::move(expired));
        });
      }
    }
  }
  RunGrants(std::move(grants));
}

HandshakeAdmissionStats HandshakeAdmission::stats() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->stats;
}

const HandshakeAdmissionOptions& HandshakeAdmission::options() const {
  return shared_->options;
}

}  // namespace rdmad::peer
