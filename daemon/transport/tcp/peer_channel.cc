// TcpPeerChannel: operations (chunking, balancing, deadlines) and the
// channel's life. The sockets are in peer_channel_io.cc.
#include "daemon/transport/tcp/peer_channel.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/runtime/coarse_clock.h"
#include "daemon/transport/tcp/peer_channel_impl.h"
#include "spdlog/spdlog.h"

namespace rdmad::tcp {
namespace {

constexpr int kMaxConnections = 64;

}  // namespace

TcpPeerChannel::Impl::Impl(TcpChannelOptions options)
    : options_(std::move(options)),
      loop_(options_.loop),
      deadlines_(loop_, [this] { ExpireDue(); }) {
  options_.connections = std::clamp(options_.connections, 1, kMaxConnections);
  options_.chunk_bytes =
      std::clamp<uint64_t>(options_.chunk_bytes, 4096, kMaxFramePayload);
  options_.min_split_bytes =
      std::clamp<uint64_t>(options_.min_split_bytes, 4096, options_.chunk_bytes);
  for (int i = 0; i < options_.connections; ++i) {
    conns_.push_back(std::make_unique<Conn>());
    conns_.back()->index = i;
  }
  infos_.resize(conns_.size());
}

TcpPeerChannel::Impl::~Impl() {
  // Normally Teardown ran on the loop. If the loop had already finished
  // (daemon shutdown), fail what is left here: nothing else will.
  if (!torn_down_) {
    for (auto& op : inbox_.TakeAll()) op.done(ClosedError());
    for (auto& [id, op] : ops_) {
      if (!op->finished) {
        op->finished = true;
        op->op.done(ClosedError());
      }
    }
  }
}

absl::Status TcpPeerChannel::Impl::ClosedError() const {
  return absl::UnavailableError(absl::StrCat(
      "peer ", options_.peer, ": its TCP data channel is closed"));
}

void TcpPeerChannel::Impl::Post(absl::Span<transport::RemoteOp> ops) {
  inbox_.Post(shared_from_this(), *loop_, ops);
}

void TcpPeerChannel::Impl::StartOps(absl::Span<transport::RemoteOp> ops) {
  if (torn_down_) {
    const absl::Status closed = ClosedError();
    for (transport::RemoteOp& op : ops) op.done(closed);
    return;
  }
  for (transport::RemoteOp& op : ops) StartOp(std::move(op));
  // Every frame of the batch is queued: each connection now writes what it
  // got in as few sendmsg calls as the socket takes.
  for (auto& c : conns_) {
    if (c->state == transport::ConnectionState::kIdle && !c->chunks.empty()) {
      StartConnecting(*c);
    } else if (c->state == transport::ConnectionState::kReady &&
               !c->send_queue.empty() && !c->want_write) {
      Flush(*c);
    }
  }
}

void TcpPeerChannel::Impl::StartOp(transport::RemoteOp in) {
  if (in.local == nullptr) {
    // A READ's bytes are copied in through the region (CopyIntoRegion).
    in.done(absl::InvalidArgumentError(
        "a TCP transfer needs its local region (RemoteOp::local)"));
    return;
  }
  if (runtime::DeadlinePassed(in.deadline)) {
    in.done(absl::DeadlineExceededError(absl::StrCat(
        "peer ", options_.peer, ": the transfer's deadline passed before "
        "it could be sent")));
    return;
  }
  if (in.immediate.has_value() && in.length > kMaxFramePayload) {
    in.done(absl::InvalidArgumentError(absl::StrCat(
        "a WRITE with an immediate moves at most ", kMaxFramePayload,
        " bytes over TCP (one frame, so that the notification follows all of "
        "its data); split it and put the immediate on the last part")));
    return;
  }
  std::unique_ptr<Op> owned = NewOp();
  Op& op = *owned;
  op.id = next_op_id_++;
  op.op = std::move(in);
  const uint64_t length = op.op.length;
  uint64_t pieces = (length + options_.chunk_bytes - 1) / options_.chunk_bytes;
  if (op.op.immediate.has_value()) {
    pieces = 1;  // the notification must follow all of the data
  } else if (pieces < conns_.size() && length >= 2 * options_.min_split_bytes) {
    pieces =
        std::min<uint64_t>(conns_.size(), length / options_.min_split_bytes);
  }
  pieces = std::max<uint64_t>(pieces, 1);
  const uint64_t piece = (length + pieces - 1) / pieces;
  const bool write = op.op.op == core::OpType::kWrite;
  uint64_t at = 0;
  while (at < length) {
    std::unique_ptr<Chunk> chunk = NewChunk();
    chunk->request_id = next_request_id_++;
    chunk->op = &op;
    chunk->op_offset = at;
    chunk->length = std::min(piece, length - at);
    chunk->write = write;
    const FrameType type = !write                       ? FrameType::kRead
                           : op.op.immediate.has_value() ? FrameType::kWriteImm
                                                         : FrameType::kWrite;
    EncodeRequest(type, chunk->request_id, op.op.key.base, op.op.key.key,
                  op.op.remote_offset + at, chunk->length,
                  chunk->header.data(), op.op.immediate.value_or(0));
    at += chunk->length;
    Conn& conn = LeastLoaded();
    conn.pending_bytes += chunk->length;
    conn.send_queue.push_back(chunk.get());
    conn.posted++;
    conn.outstanding++;
    conn.chunks.emplace(chunk->request_id, std::move(chunk));
    ++op.chunks_total;
    ++op.outstanding;
  }
  deadlines_.Consider(op.op.deadline);
  ops_.emplace(op.id, std::move(owned));
}

void TcpPeerChannel::Impl::ExpireDue() {
  if (torn_down_) return;
  const absl::Time now = absl::Now();
  std::vector<uint64_t> due;
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [id, op] : ops_) {
    if (op->finished) continue;
    if (op->op.deadline <= now) {
      due.push_back(id);
    } else {
      next = std::min(next, op->op.deadline);
    }
  }
  // By id: a completion run by Expire may post (and even finish) others.
  for (uint64_t id : due) Expire(id);
  deadlines_.Consider(next);
}

TcpPeerChannel::Impl::Conn& TcpPeerChannel::Impl::LeastLoaded() {
  // The least loaded of the connections in use; start the scan after the
  // last choice, so ties rotate over them instead of piling onto the first.
  Conn* best = nullptr;
  Conn* unused = nullptr;  // closed, holding nothing
  const size_t n = conns_.size();
  for (size_t k = 0; k < n; ++k) {
    Conn* c = conns_[(rotate_ + k) % n].get();
    if (c->state == transport::ConnectionState::kIdle && c->chunks.empty()) {
      if (unused == nullptr || c->index < unused->index) unused = c;
      continue;
    }
    if (best == nullptr || c->pending_bytes < best->pending_bytes) best = c;
  }
  // Another connection opens only when bandwidth asks for it: every one in
  // use has min_split_bytes waiting. Small operations share one, so that a
  // peer used for them costs this daemon one descriptor.
  if (best == nullptr ||
      (unused != nullptr && best->pending_bytes >= options_.min_split_bytes)) {
    best = unused;
  }
  rotate_ = (best->index + 1) % n;
  return *best;
}

void TcpPeerChannel::Impl::Expire(uint64_t op_id) {
  auto it = ops_.find(op_id);
  if (it == ops_.end() || it->second->finished) return;
  Op& op = *it->second;
  FinishOp(op, absl::DeadlineExceededError(absl::StrCat(
                   "peer ", options_.peer, ": ",
                   op.op.op == core::OpType::kWrite ? "WRITE" : "READ", " of ",
                   op.op.length, " bytes did not complete by its deadline (",
                   op.chunks_done, " of ", op.chunks_total,
                   " chunks done)")));
  MaybeForget(op);
}

void TcpPeerChannel::Impl::FinishOp(Op& op, absl::Status status) {
  op.finished = true;
  transport::OpCallback done = std::move(op.op.done);
  done(std::move(status));
}

void TcpPeerChannel::Impl::MaybeForget(Op& op) {
  if (!op.finished || op.outstanding != 0) return;
  auto it = ops_.find(op.id);
  std::unique_ptr<Op> done = std::move(it->second);
  ops_.erase(it);
  Recycle(std::move(done));
}

std::unique_ptr<TcpPeerChannel::Impl::Op> TcpPeerChannel::Impl::NewOp() {
  if (spare_ops_.empty()) return std::make_unique<Op>();
  std::unique_ptr<Op> op = std::move(spare_ops_.back());
  spare_ops_.pop_back();
  return op;
}

std::unique_ptr<TcpPeerChannel::Impl::Chunk> TcpPeerChannel::Impl::NewChunk() {
  if (spare_chunks_.empty()) return std::make_unique<Chunk>();
  std::unique_ptr<Chunk> chunk = std::move(spare_chunks_.back());
  spare_chunks_.pop_back();
  return chunk;
}

void TcpPeerChannel::Impl::Recycle(std::unique_ptr<Op> op) {
  *op = Op{};  // lets go of the regions and the callback now
  if (spare_ops_.size() < kMaxSpare) spare_ops_.push_back(std::move(op));
}

void TcpPeerChannel::Impl::Recycle(std::unique_ptr<Chunk> chunk) {
  *chunk = Chunk{};
  if (spare_chunks_.size() < kMaxSpare) {
    spare_chunks_.push_back(std::move(chunk));
  }
}

void TcpPeerChannel::Impl::CompleteChunk(Conn& conn, Chunk* chunk,
                                         const absl::Status& status) {
  Op& op = *chunk->op;
  conn.pending_bytes -= chunk->length;
  conn.outstanding--;
  if (status.ok()) {
    conn.completed++;
  } else {
    conn.errors++;
  }
  auto it = conn.chunks.find(chunk->request_id);
  Recycle(std::move(it->second));
  conn.chunks.erase(it);
  --op.outstanding;
  if (!op.finished) {
    if (!status.ok()) {
      FinishOp(op, status);
    } else if (++op.chunks_done == op.chunks_total) {
      FinishOp(op, absl::OkStatus());
    }
  }
  MaybeForget(op);
}

transport::ChannelInfo TcpPeerChannel::Impl::Describe() const {
  using transport::ConnectionState;
  transport::ChannelInfo info;
  info.kind = core::TransportKind::kTcp;
  const bool closed = inbox_.closed();
  absl::MutexLock lock(&mu_);
  info.last_error = last_error_;
  bool any_ready = false, any_error = false;
  for (size_t i = 0; i < conns_.size(); ++i) {
    const Conn& c = *conns_[i];
    transport::ConnectionInfo row;
    row.index = static_cast<uint32_t>(i);
    row.state = closed ? ConnectionState::kClosed : c.public_state.load();
    any_ready |= row.state == ConnectionState::kReady;
    any_error |= row.state == ConnectionState::kError;
    row.posted = c.posted.load();
    row.post_calls = c.post_calls.load();
    row.completed = c.completed.load();
    row.errors = c.errors.load();
    row.outstanding = c.outstanding.load();
    row.generation = c.generation.load();
    row.local_address = infos_[i].local;
    row.remote_address = infos_[i].remote;
    info.connections.push_back(std::move(row));
  }
  info.state = closed      ? transport::ChannelState::kClosed
               : any_error ? (any_ready ? transport::ChannelState::kDegraded
                                        : transport::ChannelState::kError)
                           : transport::ChannelState::kReady;
  return info;
}

void TcpPeerChannel::Impl::Close() {
  if (!inbox_.Close()) return;
  // Always through the loop, also from the loop thread itself: the caller
  // may be inside one of this channel's callbacks.
  loop_->Post([self = shared_from_this()] { self->Teardown(); });
}

void TcpPeerChannel::Impl::Teardown() {
  if (torn_down_) return;
  torn_down_ = true;
  const absl::Status closed = ClosedError();
  for (auto& op : inbox_.TakeAll()) op.done(closed);
  for (auto& c : conns_) {
    if (c->state != transport::ConnectionState::kIdle || !c->chunks.empty()) {
      FailConn(*c, "", closed);
    }
  }
  for (auto& [id, op] : ops_) {
    if (!op->finished) FinishOp(*op, closed);
  }
  ops_.clear();
  deadlines_.Cancel();
}

absl::StatusOr<std::unique_ptr<TcpPeerChannel>> TcpPeerChannel::Create(
    TcpChannelOptions options) {
  if (options.port == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer ", options.peer, " gave no TCP data port"));
  }
  if (options.loop == nullptr) {
    return absl::InvalidArgumentError("a TCP channel needs an event loop");
  }
  return std::unique_ptr<TcpPeerChannel>(
      new TcpPeerChannel(std::make_shared<Impl>(std::move(options))));
}

TcpPeerChannel::TcpPeerChannel(std::shared_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

TcpPeerChannel::~TcpPeerChannel() { Close(); }

absl::StatusOr<transport::RemoteKey> TcpPeerChannel::KeyFor(
    const core::RemoteRegionInfo& region) const {
  if (region.tcp_key == 0 || region.region_id == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        core::RemoteRegionLabel(region), " on ", region.peer,
        " has no TCP key: it is not exported; export it on that node"));
  }
  return transport::RemoteKey{region.region_id, region.tcp_key};
}

void TcpPeerChannel::Post(absl::Span<transport::RemoteOp> ops) {
  impl_->Post(ops);
}

transport::ChannelInfo TcpPeerChannel::Describe() const {
  return impl_->Describe();
}

void TcpPeerChannel::Close() { impl_->Close(); }

namespace {

class TcpPending final : public transport::Connector::Pending {
 public:
  // `self` is this daemon's Peer address, as the Connect request names it.
  TcpPending(std::string peer, std::string self, TcpChannelOptions defaults)
      : peer_(std::move(peer)),
        self_(std::move(self)),
        options_(std::move(defaults)) {}

  absl::StatusOr<std::shared_ptr<transport::DataChannel>> Finish(
      const v1::ConnectResponse& response) override {
    if (!response.has_tcp() || response.tcp().port() == 0 ||
        response.tcp().port() > 65535) {
      return absl::UnavailableError(absl::StrCat(
          "peer ", peer_, " answered Connect without a TCP data endpoint"));
    }
    options_.peer = peer_;
    options_.host = response.tcp().host();
    if (IsWildcardHost(options_.host)) {
      // The peer listens on every address: use the one we reached it at.
      RDMAD_ASSIGN_OR_RETURN(HostPort peer, ParseHostPort(peer_));
      options_.host = peer.host;
    } else {
      // Checked like any address another process sent us.
      RDMAD_RETURN_IF_ERROR(
          ParseHostPort(JoinHostPort(options_.host, 1)).status());
    }
    options_.port = static_cast<uint16_t>(response.tcp().port());
    if (response.tcp().connections() > 0) {
      options_.connections = std::min<int>(
          options_.connections, static_cast<int>(response.tcp().connections()));
    }
    // Only to a listener that takes it: an older one closes the connection.
    if (response.tcp().identify()) options_.identity = self_;
    RDMAD_ASSIGN_OR_RETURN(auto channel, TcpPeerChannel::Create(options_));
    return std::shared_ptr<transport::DataChannel>(std::move(channel));
  }

 private:
  const std::string peer_;
  const std::string self_;
  TcpChannelOptions options_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<transport::Connector::Pending>>
TcpConnector::Prepare(const std::string& peer, v1::ConnectRequest* request) {
  request->set_transport(v1::TRANSPORT_TCP);
  request->set_tcp_connections(static_cast<uint32_t>(defaults_.connections));
  TcpChannelOptions options = defaults_;
  options.loop = runtime_->PickEngine();
  return std::unique_ptr<Pending>(
      new TcpPending(peer, request->address(), std::move(options)));
}

}  // namespace rdmad::tcp
