#include "daemon/transport/verbs/rail_channel.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/core/region.h"
#include "spdlog/spdlog.h"

namespace rdmad::verbs {
namespace {

// The scheduler's state of a rail, as ListPeers and the metrics show it.
transport::RailStatus StatusOf(RailState state) {
  switch (state) {
    case RailState::kActive:
      return transport::RailStatus::kActive;
    case RailState::kProbing:
      return transport::RailStatus::kProbing;
    case RailState::kPaused:
      break;
  }
  return transport::RailStatus::kPaused;
}

// Whether a piece that failed with `code` failed for its own operation's
// sake (a deadline, a refused access, a bad request, a notification the
// owner could not take); any other failure on a rail whose QPs failed is
// the rail's (retries exhausted, its link down, work flushed).
bool OperationsOwn(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kDeadlineExceeded:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string RailLabel(const RailLink& link) {
  return absl::StrCat(link.device, "/", link.port, "->",
                      link.remote_device.empty() ? "?" : link.remote_device);
}

std::shared_ptr<PeerRails> PeerRailsRegistry::For(const std::string& peer,
                                                  size_t rails) {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(peer);
  if (it != peers_.end() && it->second->count >= rails) {
    it->second->used = ++uses_;
    return it->second;
  }
  if (it == peers_.end() && peers_.size() >= max_peers_ && !peers_.empty()) {
    auto oldest = peers_.begin();
    for (auto i = peers_.begin(); i != peers_.end(); ++i) {
      if (i->second->used < oldest->second->used) oldest = i;
    }
    peers_.erase(oldest);
  }
  auto made = std::make_shared<PeerRails>(options_, rails);
  made->used = ++uses_;
  peers_[peer] = made;
  return made;
}

std::shared_ptr<RailChannel> RailChannel::Create(RailChannelOptions options,
                                                 std::vector<RailLink> links) {
  if (links.size() > kMaxRails) links.resize(kMaxRails);
  return std::shared_ptr<RailChannel>(
      new RailChannel(std::move(options), std::move(links)));
}

RailChannel::RailChannel(RailChannelOptions options,
                         std::vector<RailLink> links)
    : options_(std::move(options)),
      links_(std::move(links)),
      rails_(options_.rails) {
  // The topology says something only when every rail's device has a
  // known NUMA node and they are not all the same.
  bool known = true;
  std::vector<int> nodes;
  for (const RailLink& link : links_) {
    if (link.channel == nullptr) continue;
    known &= link.numa_node >= 0;
    nodes.push_back(link.numa_node);
  }
  numa_matters_ =
      known && std::adjacent_find(nodes.begin(), nodes.end(),
                                  std::not_equal_to<>()) != nodes.end();
  std::vector<std::pair<size_t, RailStats>> paused;
  {
    absl::MutexLock lock(&rails_->mu);
    const absl::Time now = options_.now();
    for (size_t r = 0; r < links_.size(); ++r) {
      rails_->scheduler.SetPortActive(
          r, options_.port_active ? options_.port_active(r) : true);
      // A rail that could not be set up rests like one that failed.
      if (links_[r].channel == nullptr && !links_[r].setup_error.empty() &&
          rails_->scheduler.Pause(r, now, links_[r].setup_error)) {
        paused.emplace_back(r, rails_->scheduler.Stats(r, now));
      }
    }
  }
  for (const auto& [r, stats] : paused) LogPause(r, stats);
}

RailChannel::~RailChannel() { Close(); }

void RailChannel::Post(absl::Span<transport::RemoteOp> ops) {
  const absl::Time now = options_.now();
  std::vector<Piece> pieces;
  std::vector<std::pair<transport::OpCallback, absl::Status>> refused;
  for (transport::RemoteOp& raw : ops) {
    if (raw.length == 0 || raw.local == nullptr || raw.local_addr == nullptr) {
      refused.emplace_back(std::move(raw.done),
                           absl::InvalidArgumentError(
                               "a verbs operation needs a local region, an "
                               "address and a length"));
      continue;
    }
    auto op = std::make_shared<Op>();
    op->keyed = Keyed(raw);
    op->op = std::move(raw);
    std::vector<RailSlice> slices;
    absl::Status why;
    bool planned = false;
    {
      absl::MutexLock lock(&rails_->mu);
      if (closed_) {
        why = ClosedError();
      } else {
        planned = Plan(*op, now, &slices, &why);
      }
    }
    if (!planned) {
      refused.emplace_back(std::move(op->op.done), std::move(why));
      continue;
    }
    // A WRITE with an immediate carries it on its one piece, or on the
    // held-back last one.
    const bool immediate =
        op->op.immediate.has_value() && !op->held.has_value();
    for (const RailSlice& slice : slices) {
      pieces.push_back(Piece{op, slice, immediate});
    }
  }
  for (auto& [done, status] : refused) done(std::move(status));
  PostPieces(std::move(pieces));
}

transport::RemoteOp RailChannel::MakeRemoteOp(const Piece& piece) {
  const transport::RemoteOp& op = piece.op->op;
  const RailSlice& slice = piece.slice;
  transport::RemoteOp sub;
  sub.op = op.op;
  sub.local = op.local;
  sub.local_addr = op.local_addr + slice.offset;
  sub.length = slice.length;
  sub.remote = op.remote;
  sub.key = KeyOn(slice.rail, op.remote.get(), op.key).value_or(op.key);
  sub.remote_offset = op.remote_offset + slice.offset;
  sub.deadline = op.deadline;
  if (piece.immediate) {
    sub.immediate = op.immediate;
    sub.notify_before = op.notify_before + slice.offset;
  }
  sub.done = [self = shared_from_this(), piece](absl::Status status) {
    self->OnPiece(piece, std::move(status));
  };
  return sub;
}

void RailChannel::PostPieces(std::vector<Piece> pieces) {
  if (pieces.empty()) return;
  // One Post per rail: one chain per QP.
  std::vector<std::vector<transport::RemoteOp>> per_rail(links_.size());
  for (const Piece& piece : pieces) {
    per_rail[piece.slice.rail].push_back(MakeRemoteOp(piece));
  }
  for (size_t r = 0; r < links_.size(); ++r) {
    if (!per_rail[r].empty()) {
      links_[r].channel->Post(absl::MakeSpan(per_rail[r]));
    }
  }
}

void RailChannel::OnPiece(const Piece& piece, absl::Status status) {
  const absl::Time now = options_.now();
  const size_t rail = piece.slice.rail;
  const uint64_t length = piece.slice.length;
  Op& op = *piece.op;
  std::optional<Piece> again;    // the same piece, on another rail
  std::optional<Piece> release;  // the held-back last piece
  bool finish = false;
  bool paused = false;
  bool probed = false;
  RailStats stats;
  {
    absl::MutexLock lock(&rails_->mu);
    RailScheduler& s = rails_->scheduler;
    if (status.ok()) {
      probed = s.state(rail) == RailState::kProbing;
      s.Completed(rail, length, now);
    } else {
      s.Failed(rail, length);
      const RailLink& link = links_[rail];
      const bool broken = (shut_ & RailBit(rail)) != 0 ||
                          link.channel->NeedsReconnect();
      const bool own = OperationsOwn(status.code());
      if (broken && own) {
        // Its QPs failed for this operation's deadline or a remote access
        // error: new QPs, but the rail did nothing wrong.
        blameless_ |= RailBit(rail);
      }
      if (broken && !own && !closed_) {
        if ((blameless_ & RailBit(rail)) == 0) {
          paused = s.Pause(rail, now, std::string(status.message()));
          if (paused) stats = s.Stats(rail, now);
        }
        if (now < op.op.deadline) {
          const RailSet usable = op.keyed & Healthy() & ~RailBit(rail);
          ResumeDue(usable, now);
          if (auto other = s.PickWhole(usable)) {
            s.Posted(*other, length, now);
            again = Piece{piece.op, RailSlice{*other, piece.slice.offset,
                                              length},
                          piece.immediate};
          }
        }
      }
      if (!again.has_value() && op.status.ok()) op.status = status;
    }
    if (!again.has_value() && --op.pieces_left == 0) {
      if (op.held.has_value() && op.status.ok() && !closed_) {
        // Every other piece is in place: the last one may announce them.
        RailSlice last = *op.held;
        op.held.reset();
        const RailSet usable = op.keyed & Healthy();
        if ((s.Eligible(usable) & RailBit(last.rail)) == 0) {
          ResumeDue(usable, now);
          if (auto other = s.PickWhole(usable)) {
            last.rail = *other;
          } else {
            op.status = NoRailError(op.keyed);
          }
        }
        if (op.status.ok()) {
          s.Posted(last.rail, last.length, now);
          op.pieces_left = 1;
          release = Piece{piece.op, last, /*immediate=*/true};
        }
      } else if (op.held.has_value() && op.status.ok()) {
        op.status = ClosedError();
      }
      if (!release.has_value()) {
        finish = true;
        --ops_in_flight_;
      }
    }
  }
  if (paused) LogPause(rail, stats);
  if (probed) {
    spdlog::info("peer {}: rail {} ({}) passed its probe: back in service",
                 options_.peer, rail, RailLabel(links_[rail]));
  }
  if (again.has_value()) PostPieces({*again});
  if (release.has_value()) PostPieces({*release});
  if (finish) {
    transport::OpCallback done = std::move(op.op.done);
    op.op.done = nullptr;
    done(op.status);
  }
}

void RailChannel::LogPause(size_t rail, const RailStats& stats) const {
  spdlog::warn("peer {}: rail {} ({}) paused for {} (pause {}): {}; its work "
               "goes to the other rails",
               options_.peer, rail, RailLabel(links_[rail]),
               absl::FormatDuration(stats.paused_left), stats.pauses,
               stats.last_error);
}

absl::Status RailChannel::ClosedError() const {
  return absl::UnavailableError(absl::StrCat(
      "the verbs data channel to peer ", options_.peer, " was closed"));
}

bool RailChannel::NeedsReconnect() const {
  absl::MutexLock lock(&rails_->mu);
  if (closed_) return false;
  const RailScheduler& s = rails_->scheduler;
  const RailSet healthy = Healthy();
  bool some_port = false;
  bool due = false;
  const absl::Time now = options_.now();
  for (size_t r = 0; r < links_.size(); ++r) {
    // A rail the peer pairs none with: no rebuild brings one.
    if (links_[r].channel == nullptr && links_[r].setup_error.empty()) continue;
    some_port |= s.port_active(r);
    // QPs gone, port ACTIVE, pause over: new QPs can bring it back.
    if ((healthy & RailBit(r)) == 0 && s.PauseOver(r, now)) due = true;
  }
  // Nothing works: rebuild now, as a channel of one rail does.
  if (healthy == 0) return some_port;
  if (!due) {
    rebuild_due_since_ = absl::InfiniteFuture();
    return false;
  }
  // Rebuild between operations, so that none in flight is disturbed; a
  // channel that is never idle waits pause_min for it.
  if (rebuild_due_since_ == absl::InfiniteFuture()) rebuild_due_since_ = now;
  return ops_in_flight_ == 0 ||
         now - rebuild_due_since_ >= s.options().pause_min;
}

transport::ChannelInfo RailChannel::Describe() const {
  // Each rail's channel asks its own loop: outside the lock.
  std::vector<transport::ChannelInfo> per_rail(links_.size());
  for (size_t r = 0; r < links_.size(); ++r) {
    if (links_[r].channel != nullptr) {
      per_rail[r] = links_[r].channel->Describe();
    }
  }
  transport::ChannelInfo info;
  info.kind = core::TransportKind::kVerbs;
  absl::MutexLock lock(&rails_->mu);
  const RailScheduler& s = rails_->scheduler;
  const RailSet healthy = Healthy();
  const absl::Time now = options_.now();
  bool degraded = false;
  for (size_t r = 0; r < links_.size(); ++r) {
    const RailLink& link = links_[r];
    if (link.channel == nullptr && link.setup_error.empty()) continue;
    const RailStats st = s.Stats(r, now);
    transport::RailInfo rail;
    rail.index = static_cast<uint32_t>(r);
    rail.device = link.device;
    rail.port = link.port;
    rail.remote_device = link.remote_device;
    const bool sound = (healthy & RailBit(r)) != 0;
    // ACTIVE in the scheduler but its QPs failed for someone else's
    // reason: new ones come with the next Peer.Connect.
    rail.state = !sound && st.state == RailState::kActive
                     ? transport::RailStatus::kRebuilding
                     : StatusOf(st.state);
    degraded |= !sound || st.state != RailState::kActive;
    static_cast<transport::RailCounters&>(rail) = st;
    rail.numa_node = link.numa_node;
    info.rails.push_back(std::move(rail));
    if (info.last_error.empty()) info.last_error = per_rail[r].last_error;
    for (transport::ConnectionInfo& c : per_rail[r].connections) {
      c.rail = static_cast<uint32_t>(r);
      info.connections.push_back(std::move(c));
    }
  }
  info.state = closed_           ? transport::ChannelState::kClosed
               : healthy == 0    ? transport::ChannelState::kError
               : degraded        ? transport::ChannelState::kDegraded
                                 : transport::ChannelState::kReady;
  return info;
}

void RailChannel::Close() {
  {
    absl::MutexLock lock(&rails_->mu);
    if (closed_) return;
    closed_ = true;
  }
  for (const RailLink& link : links_) {
    if (link.channel != nullptr) link.channel->Close();
  }
}

void RailChannel::OnPortChange(const std::string& device, uint32_t port,
                               bool active) {
  const absl::Time now = options_.now();
  std::vector<size_t> shut;
  std::vector<std::pair<size_t, RailStats>> paused;
  {
    absl::MutexLock lock(&rails_->mu);
    if (closed_) return;
    RailScheduler& s = rails_->scheduler;
    for (size_t r = 0; r < links_.size(); ++r) {
      const RailLink& link = links_[r];
      if (link.device != device || link.port != port) continue;
      s.SetPortActive(r, active);
      if (active || link.channel == nullptr) continue;
      if (s.Pause(r, now, absl::StrCat("port ", port, " of ", device,
                                       " went down"))) {
        paused.emplace_back(r, s.Stats(r, now));
      }
      if ((shut_ & RailBit(r)) == 0) {
        shut_ |= RailBit(r);
        shut.push_back(r);
      }
    }
  }
  for (const auto& [r, stats] : paused) LogPause(r, stats);
  // Its pieces fail UNAVAILABLE at once and go to the other rails, instead
  // of waiting for the QPs' retries to run out.
  for (size_t r : shut) links_[r].channel->Close();
}

}  // namespace rdmad::verbs
