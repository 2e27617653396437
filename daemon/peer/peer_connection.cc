#include "daemon/peer/peer_connection.h"

#include <algorithm>
#include <random>
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
                               PeerConnectionContext context, NamesSink names)
    : address_(std::move(address)),
      mode_(mode),
      connector_(context.connector),
      timers_(context.timers),
      admission_(context.admission),
      on_failed_(std::move(context.on_failed)),
      names_(std::move(names)) {}

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

void PeerConnection::Acquire(absl::Time deadline, Callback<Link> done,
                             std::optional<NameRequest> name) {
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
      w.deadline = deadline;
      w.name = std::move(name);
      w.done = std::move(done);
      std::weak_ptr<PeerConnection> weak = weak_from_this();
      w.timer = timers_->RunAt(deadline, [weak, id = w.id] {
        if (auto self = weak.lock()) self->Expire(id);
      });
      if (state_ != PeerState::kHello && state_ != PeerState::kConnecting) {
        state_ = PeerState::kHello;
        attempt = ++attempt_;
        busy_ = 0;
      }
    }
  }
  if (!refused.ok()) return done(std::move(refused));
  if (ready.has_value()) return done(*std::move(ready));
  if (attempt == 0) return;  // a handshake is already under way
  Admit(attempt);
}

void PeerConnection::Admit(uint64_t attempt) {
  {
    absl::MutexLock lock(&mu_);
    // A retry's timer may fire after a newer attempt or Retire.
    if (attempt != attempt_ || state_ == PeerState::kRetired) return;
  }
  if (admission_ == nullptr) {
    return OnAdmitted(attempt, HandshakeAdmission::Ticket());
  }
  admission_->Enter(absl::InfiniteFuture(),
                    [self = shared_from_this(), attempt](
                        absl::StatusOr<HandshakeAdmission::Ticket> ticket) {
                      self->OnAdmitted(attempt, std::move(ticket));
                    });
}

std::vector<core::TransportKind> PeerConnection::Proposals() const {
  std::vector<core::TransportKind> offers;
  {
    absl::MutexLock lock(&mu_);
    offers = peer_offers_;
  }
  const bool known = !offers.empty();
  if (!known) offers = {core::TransportKind::kVerbs, core::TransportKind::kTcp};
  std::string why_not;
  const bool verbs = connector_->CanUse(core::TransportKind::kVerbs, &why_not);
  auto choice =
      transport::ChoosePeerTransport(mode_, verbs, why_not, offers, address_);
  // No proposal: the Hello alone, and the choice's error after it.
  if (!choice.ok()) return {};
  std::vector<core::TransportKind> out = {choice->kind};
  if (!known && choice->kind == core::TransportKind::kVerbs &&
      mode_ == core::TransportMode::kAuto) {
    // The peer may offer TCP alone.
    out.push_back(core::TransportKind::kTcp);
  }
  return out;
}

void PeerConnection::OnAdmitted(
    uint64_t attempt, absl::StatusOr<HandshakeAdmission::Ticket> ticket) {
  Handshake handshake;
  bool propose = false;
  {
    absl::MutexLock lock(&mu_);
    if (attempt != attempt_ || state_ == PeerState::kRetired) return;
    if (ticket.ok()) {
      if (waiters_.empty()) {
        // Everyone who wanted it gave up while it waited its turn.
        state_ = PeerState::kNew;
        return;
      }
      ticket_ = *std::move(ticket);
      // A channel that may still be reused must not be replaced by a
      // proposal the peer accepts: propose only where there is none.
      propose = channel_ == nullptr || channel_->NeedsReconnect();
      handshake.deadline = absl::InfinitePast();
      for (const Waiter& w : waiters_) {
        handshake.deadline = std::max(handshake.deadline, w.deadline);
        if (!w.name.has_value() || handshake.names.size() >= kMaxHelloNames) {
          continue;
        }
        const bool known =
            std::any_of(handshake.names.begin(), handshake.names.end(),
                        [&](const NameRequest& n) {
                          return n.name == w.name->name && n.uid == w.name->uid;
                        });
        if (!known) handshake.names.push_back(*w.name);
      }
    }
  }
  if (!ticket.ok()) return Finish(attempt, ticket.status());
  if (propose) handshake.propose = Proposals();
  connector_->Hello(
      address_, std::move(handshake),
      [self = shared_from_this(), attempt](absl::StatusOr<HelloReply> reply) {
        self->OnHello(attempt, std::move(reply));
      });
}

void PeerConnection::RetryLater(uint64_t attempt, const absl::Status& busy) {
  HandshakeAdmission::Ticket ticket;  // no slot is held while waiting
  {
    absl::MutexLock lock(&mu_);
    if (attempt != attempt_ || state_ == PeerState::kRetired) return;
    ticket = std::move(ticket_);
    last_error_ = std::string(busy.message());
    if (waiters_.empty()) {
      state_ = PeerState::kNew;
      return;
    }
    // 10 ms, doubling up to 1 s, each drawn from [0.5x, 1.5x) so that the
    // callers a busy peer turned away do not all come back at once.
    const absl::Duration base = std::min(
        absl::Seconds(1), absl::Milliseconds(10) * (1 << std::min(busy_, 7)));
    ++busy_;
    thread_local std::minstd_rand random(std::random_device{}());
    const double factor =
        std::uniform_real_distribution<double>(0.5, 1.5)(random);
    std::weak_ptr<PeerConnection> weak = weak_from_this();
    retry_timer_ =
        timers_->RunAt(timers_->Now() + base * factor, [weak, attempt] {
          if (auto self = weak.lock()) {
            self->Admit(attempt);
          }
        });
  }
  spdlog::debug("peer {} is busy; asking again: {}", address_,
                std::string(busy.message()));
}

void PeerConnection::OnHello(uint64_t attempt,
                             absl::StatusOr<HelloReply> reply) {
  if (!reply.ok()) {
    if (reply.status().code() == absl::StatusCode::kResourceExhausted) {
      return RetryLater(attempt, reply.status());
    }
    return Finish(attempt, reply.status());
  }
  // Before any waiter runs: the first transfers find their names.
  if (names_ != nullptr && !reply->names.empty()) {
    names_(reply->incarnation, std::move(reply->names));
  }
  std::string why_not;
  const bool verbs = connector_->CanUse(core::TransportKind::kVerbs, &why_not);
  auto choice = transport::ChoosePeerTransport(mode_, verbs, why_not,
                                               reply->transports, address_);
  std::shared_ptr<transport::DataChannel> offered = std::move(reply->channel);
  std::vector<std::shared_ptr<transport::DataChannel>> retired;
  if (offered != nullptr &&
      (!choice.ok() || choice->kind != reply->channel_kind)) {
    // Not what this daemon chooses now that it knows the peer's offers.
    retired.push_back(std::move(offered));
  }
  std::optional<Link> ready;
  bool stale = false;
  {
    absl::MutexLock lock(&mu_);
    if (attempt != attempt_ || state_ == PeerState::kRetired) {
      stale = true;
      retired.push_back(std::move(offered));
    } else {
      peer_offers_ = reply->transports;
      busy_ = 0;
      if (incarnation_ != 0 && incarnation_ != reply->incarnation) {
        spdlog::info(
            "peer {} restarted (incarnation {:x} -> {:x}): rebuilding "
            "its data channel",
            address_, incarnation_, reply->incarnation);
        retired.push_back(std::move(channel_));
        channel_ = nullptr;
      }
      incarnation_ = reply->incarnation;
      identity_ = std::make_shared<const core::PeerIdentity>(
          std::move(reply->identity));
      if (channel_ != nullptr && channel_->NeedsReconnect()) {
        // Same daemon, but the channel cannot recover alone (a verbs QP went
        // to the error state): build a new pool with a new generation.
        spdlog::info("peer {}: rebuilding its {} data channel after an error",
                     address_,
                     std::string(core::TransportKindName(transport_)));
        retired.push_back(std::move(channel_));
        channel_ = nullptr;
      }
      if (offered != nullptr) {
        // Ready in one round trip.
        if (channel_ != nullptr) retired.push_back(std::move(channel_));
        channel_ = std::move(offered);
        transport_ = choice->kind;
        transport_reason_ = choice->reason;
        ready = Link{channel_, incarnation_, transport_};
      } else if (channel_ != nullptr) {
        // The run we have a healthy channel to: it reconnects by itself.
        ready = Link{channel_, incarnation_, transport_};
      } else if (choice.ok() && reply->connect_status.ok()) {
        state_ = PeerState::kConnecting;
        transport_ = choice->kind;
        transport_reason_ = choice->reason;
      }
    }
  }
  for (auto& c : retired) {
    if (c != nullptr) c->Close();
  }
  if (stale) return;
  if (ready.has_value()) {
    if (ready->channel != nullptr && reply->channel_kind == ready->kind) {
      spdlog::debug("peer {}: {} data channel ready", address_,
                    std::string(core::TransportKindName(ready->kind)));
    }
    return Finish(attempt, *std::move(ready));
  }
  if (!choice.ok()) return Finish(attempt, choice.status());
  // The peer tried the proposal and could not serve it: Connect would
  // only repeat that.
  if (!reply->connect_status.ok()) {
    return Finish(attempt, reply->connect_status);
  }
  // An older peer, or a choice other than what was proposed: Connect.
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
  HandshakeAdmission::Ticket ticket;  // the slot goes back, after the lock
  {
    absl::MutexLock lock(&mu_);
    if (attempt != attempt_ || state_ == PeerState::kRetired) return;
    ticket = std::move(ticket_);
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
    if (on_failed_) on_failed_(address_);
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
  HandshakeAdmission::Ticket ticket;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == PeerState::kRetired) return;
    state_ = PeerState::kRetired;
    retired_ = why;
    ++attempt_;  // answers still out are dropped
    ticket = std::move(ticket_);
    if (retry_timer_ != 0) timers_->Cancel(retry_timer_);
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
