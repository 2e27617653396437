#include "daemon/peer/peer_connection.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/transport/transport_choice.h"
#include "spdlog/spdlog.h"

namespace rdmad::peer {

absl::string_view PeerStateName(PeerState state) {
  switch (state) {
    case PeerState::kNew:
      return "NEW";
    case PeerState::kHello:
      return "HELLO";
    case PeerState::kConnecting:
      return "CONNECTING";
    case PeerState::kReady:
      return "READY";
    case PeerState::kFailed:
      return "FAILED";
    case PeerState::kRetired:
      break;
  }
  return "RETIRED";
}

PeerConnection::PeerConnection(std::string address, core::TransportMode mode,
                               PeerConnector* connector,
                               runtime::Timers* timers)
    : address_(std::move(address)),
      mode_(mode),
      connector_(connector),
      timers_(timers) {}

PeerConnection::~PeerConnection() {
  Retire(absl::UnavailableError(
      absl::StrCat("peer ", address_, " was forgotten")));
}

bool PeerConnection::Healthy() const {
  return state_ == PeerState::kReady && !stale_ && channel_ != nullptr &&
         !channel_->NeedsReconnect();
}

std::optional<Link> PeerConnection::ReadyLink() const {
  absl::MutexLock lock(&mu_);
  if (!Healthy()) return std::nullopt;
  return Link{channel_, incarnation_, transport_};
}

std::shared_ptr<const core::PeerIdentity> PeerConnection::IdentityOf(
    uint64_t incarnation) const {
  absl::MutexLock lock(&mu_);
  return incarnation == incarnation_ ? identity_ : nullptr;
}

void PeerConnection::Acquire(absl::Time deadline, Callback<Link> done) {
  uint64_t attempt = 0;
  absl::Status refused;
  std::optional<Link> ready;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == PeerState::kRetired) {
      refused = retired_;
    } else if (Healthy()) {
      ready = Link{channel_, incarnation_, transport_};
    } else if (timers_->Now() >= deadline) {
      refused = absl::DeadlineExceededError(absl::StrCat(
          "peer ", address_, ": the transfer's deadline passed before a "
          "connection was ready"));
    } else {
      Waiter& w = waiters_.emplace_back();
      w.id = next_waiter_++;
      w.done = std::move(done);
      std::weak_ptr<PeerConnection> weak = weak_from_this();
      w.timer = timers_->RunAt(deadline, [weak, id = w.id] {
        if (auto self = weak.lock()) self->Expire(id);
      });
      if (state_ != PeerState::kHello && state_ != PeerState::kConnecting) {
        state_ = PeerState::kHello;
        attempt = ++attempt_;
      }
    }
  }
  if (!refused.ok()) return done(std::move(refused));
  if (ready.has_value()) return done(*std::move(ready));
  if (attempt == 0) return;  // a handshake is already under way
  connector_->Hello(address_, [self = shared_from_this(), attempt](
                                  absl::StatusOr<HelloReply> reply) {
    self->OnHello(attempt, std::move(reply));
  });
}

void PeerConnection::OnHello(uint64_t attempt,
                             absl::StatusOr<HelloReply> reply) {
  if (!reply.ok()) return Finish(attempt, reply.status());
  std::shared_ptr<transport::DataChannel> retired;
  std::optional<Link> reuse;
  {
    absl::MutexLock lock(&mu_);
    if (attempt != attempt_ || state_ == PeerState::kRetired) return;
    if (incarnation_ != 0 && incarnation_ != reply->incarnation) {
      spdlog::info("peer {} restarted (incarnation {:x} -> {:x}): rebuilding "
                   "its data channel",
                   address_, incarnation_, reply->incarnation);
      retired = std::move(channel_);
      channel_ = nullptr;
    }
    incarnation_ = reply->incarnation;
    identity_ =
        std::make_shared<const core::PeerIdentity>(std::move(reply->identity));
    if (channel_ != nullptr && channel_->NeedsReconnect()) {
      // Same daemon, but the channel cannot recover alone (a verbs QP went
      // to the error state): build a new pool with a new generation.
      spdlog::info("peer {}: rebuilding its {} data channel after an error",
                   address_, std::string(core::TransportKindName(transport_)));
      retired = std::move(channel_);
      channel_ = nullptr;
    }
    if (channel_ != nullptr) {
      // The run we have a healthy channel to: it reconnects by itself.
      reuse = Link{channel_, incarnation_, transport_};
    }
  }
  if (retired != nullptr) retired->Close();
  if (reuse.has_value()) return Finish(attempt, *std::move(reuse));

  std::string why_not;
  const bool verbs = connector_->CanUse(core::TransportKind::kVerbs, &why_not);
  auto choice = transport::ChoosePeerTransport(mode_, verbs, why_not,
                                               reply->transports, address_);
  if (!choice.ok()) return Finish(attempt, choice.status());
  {
    absl::MutexLock lock(&mu_);
    if (attempt != attempt_ || state_ == PeerState::kRetired) return;
    state_ = PeerState::kConnecting;
    transport_ = choice->kind;
    transport_reason_ = choice->reason;
  }
  connector_->Connect(
      address_, choice->kind, reply->incarnation,
      [self = shared_from_this(), attempt](
          absl::StatusOr<std::shared_ptr<transport::DataChannel>> channel) {
        self->OnConnected(attempt, std::move(channel));
      });
}

void PeerConnection::OnConnected(
    uint64_t attempt,
    absl::StatusOr<std::shared_ptr<transport::DataChannel>> channel) {
  if (!channel.ok()) return Finish(attempt, channel.status());
  Link link;
  std::shared_ptr<transport::DataChannel> unused;
  {
    absl::MutexLock lock(&mu_);
    if (attempt != attempt_ || state_ == PeerState::kRetired) {
      unused = *std::move(channel);
    } else {
      std::swap(channel_, *channel);
      unused = *std::move(channel);  // the one it replaced, if any
      link = Link{channel_, incarnation_, transport_};
    }
  }
  if (unused != nullptr) unused->Close();
  if (link.channel != nullptr) Finish(attempt, std::move(link));
}

void PeerConnection::Finish(uint64_t attempt, absl::StatusOr<Link> result) {
  Waiters waiters;
  {
    absl::MutexLock lock(&mu_);
    if (attempt != attempt_ || state_ == PeerState::kRetired) return;
    if (result.ok()) {
      // last_error_ stays: it is the last failure, even after a recovery.
      state_ = PeerState::kReady;
      stale_ = false;
    } else {
      state_ = PeerState::kFailed;
      last_error_ = std::string(result.status().message());
      failed_at_ = timers_->Now();
    }
    waiters = TakeWaiters();
  }
  if (!result.ok()) {
    spdlog::warn("{}", std::string(result.status().message()));
    // A fresh gRPC channel for the next try.
    connector_->Forget(address_);
  }
  for (Waiter& w : waiters) w.done(result);
}

PeerConnection::Waiters PeerConnection::TakeWaiters() {
  Waiters waiters;
  waiters.swap(waiters_);
  for (const Waiter& w : waiters) timers_->Cancel(w.timer);
  return waiters;
}

void PeerConnection::Expire(uint64_t waiter_id) {
  Callback<Link> done;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if (it->id == waiter_id) {
        done = std::move(it->done);
        waiters_.erase(it);
        break;
      }
    }
  }
  if (done) {
    done(absl::DeadlineExceededError(
        absl::StrCat("peer ", address_, " did not answer before the "
                     "transfer's deadline")));
  }
}

void PeerConnection::MarkStale(const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (state_ == PeerState::kRetired) return;
  stale_ = true;
  last_error_ = std::string(why.message());
}

void PeerConnection::RecordError(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  last_error_ = absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                             status.message());
}

void PeerConnection::Retire(const absl::Status& why) {
  Waiters waiters;
  std::shared_ptr<transport::DataChannel> channel;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == PeerState::kRetired) return;
    state_ = PeerState::kRetired;
    retired_ = why;
    ++attempt_;  // answers still out are dropped
    channel = std::move(channel_);
    channel_ = nullptr;
    waiters = TakeWaiters();
  }
  if (channel != nullptr) channel->Close();
  for (Waiter& w : waiters) w.done(why);
}

PeerConnectionSnapshot PeerConnection::Snapshot() const {
  absl::MutexLock lock(&mu_);
  PeerConnectionSnapshot s;
  s.state = state_;
  s.incarnation = incarnation_;
  s.transport = transport_;
  s.transport_reason = transport_reason_;
  s.last_error = last_error_;
  s.channel = channel_;
  s.waiters = waiters_.size();
  s.failed_at = failed_at_;
  return s;
}

}  // namespace rdmad::peer
