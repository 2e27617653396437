#include "daemon/transport/tcp/peer_channel.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "daemon/transport/tcp/event_loop.h"
#include "daemon/transport/tcp/wire.h"
#include "spdlog/spdlog.h"

namespace rdmad::tcp {
namespace {

constexpr int kMaxIov = 64;
constexpr uint64_t kReadBudget = 16ull << 20;
constexpr size_t kDiscardBufferSize = 256 << 10;
constexpr int kMaxConnections = 64;

const char* StateName(int state) {
  switch (state) {
    case 0:
      return "IDLE";
    case 1:
      return "CONNECTING";
    case 2:
      return "READY";
    case 3:
      return "ERROR";
    default:
      return "CLOSED";
  }
}

}  // namespace

// Everything below runs on the channel's loop thread, except Post,
// Describe and Close (marked), which only touch the mutex-guarded parts and
// the atomics.
class TcpPeerChannel::Impl final : public EventLoop::Delegate {
 public:
  explicit Impl(TcpChannelOptions options) : options_(std::move(options)) {
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

  absl::Status Start() {
    RDMAD_ASSIGN_OR_RETURN(loop_, EventLoop::Create("rdmad-tcpchan", this));
    loop_->Start();
    return absl::OkStatus();
  }

  // Any thread.
  void Post(transport::RemoteOp op, transport::OpCallback done) {
    bool wake = false;
    {
      absl::MutexLock lock(&mu_);
      if (!closed_) {
        wake = incoming_.empty();
        incoming_.push_back({std::move(op), std::move(done)});
        done = nullptr;
      }
    }
    if (done) {
      done(absl::UnavailableError(absl::StrCat(
          "peer ", options_.peer, ": its TCP data channel is closed")));
      return;
    }
    if (wake) loop_->Wake();
  }

  // Any thread.
  transport::ChannelInfo Describe() const {
    transport::ChannelInfo info;
    info.kind = v1::TRANSPORT_TCP;
    absl::MutexLock lock(&mu_);
    info.last_error = last_error_;
    bool any_ready = false, any_error = false;
    for (size_t i = 0; i < conns_.size(); ++i) {
      const Conn& c = *conns_[i];
      transport::ConnectionInfo row;
      row.index = static_cast<uint32_t>(i);
      row.local_qpn = static_cast<uint32_t>(i);
      const int state = closed_ ? 4 : c.public_state.load();
      row.state = StateName(state);
      any_ready |= state == 2;
      any_error |= state == 3;
      row.posted = c.posted.load();
      row.completed = c.completed.load();
      row.errors = c.errors.load();
      row.outstanding = c.outstanding.load();
      row.generation = c.generation.load();
      row.local_address = infos_[i].local;
      row.remote_address = infos_[i].remote;
      info.connections.push_back(std::move(row));
    }
    info.state = closed_      ? "CLOSED"
                 : any_error ? (any_ready ? "DEGRADED" : "ERROR")
                             : "READY";
    return info;
  }

  // Any thread but the loop's.
  void Close() {
    {
      absl::MutexLock lock(&mu_);
      closed_ = true;
    }
    if (loop_ == nullptr) return;
    if (loop_->InLoopThread()) {
      spdlog::error("peer {}: TCP channel closed from its own I/O thread; "
                    "closing it later", options_.peer);
    }
    loop_->Stop();
  }

  // EventLoop::Delegate.
  void OnEvent(uint64_t tag, uint32_t events) override {
    Conn* conn = nullptr;
    for (auto& c : conns_) {
      if (c->tag == tag && c->fd) conn = c.get();
    }
    if (conn == nullptr) return;  // a socket closed earlier in this batch
    if (conn->state == State::kConnecting) {
      if (absl::Status s = ConnectResult(conn->fd.get()); !s.ok()) {
        FailConn(*conn, absl::StrCat("cannot connect to its data listener ",
                                     JoinHostPort(options_.host, options_.port),
                                     ": ", s.message()));
        return;
      }
      OnConnected(*conn);
      return;
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
      if (!OnReadable(*conn)) return;
    }
    if (events & EPOLLOUT) Flush(*conn);
  }

  absl::Time OnTick(absl::Time now) override {
    TakeIncoming();
    // Deadlines.
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      const uint64_t id = deadlines_.begin()->second;
      deadlines_.erase(deadlines_.begin());
      auto it = ops_.find(id);
      if (it == ops_.end() || it->second->finished) continue;
      Op& op = *it->second;
      FinishOp(op, absl::DeadlineExceededError(absl::StrCat(
                       "peer ", options_.peer, ": ",
                       op.op.op == core::OpType::kWrite ? "WRITE" : "READ",
                       " of ", op.op.length, " bytes did not complete by its "
                       "deadline (", op.chunks_done, " of ", op.chunks_total,
                       " chunks done)")));
      MaybeForget(op);
    }
    absl::Time next = deadlines_.empty() ? absl::InfiniteFuture()
                                         : deadlines_.begin()->first;
    for (auto& c : conns_) {
      if (c->state != State::kConnecting) continue;
      if (c->connect_deadline <= now) {
        FailConn(*c, absl::StrCat("no connection to its data listener ",
                                  JoinHostPort(options_.host, options_.port),
                                  " within ",
                                  absl::FormatDuration(options_.connect_timeout)));
      } else {
        next = std::min(next, c->connect_deadline);
      }
    }
    return next;
  }

  void OnStop() override {
    const std::string why = absl::StrCat(
        "peer ", options_.peer, ": its TCP data channel was closed");
    TakeIncoming();  // fails them: closed_ is set
    for (auto& c : conns_) {
      if (c->state != State::kIdle || !c->chunks.empty()) {
        FailConn(*c, "", absl::UnavailableError(why));
      }
    }
    // Anything still known (finished ops waiting for nothing) goes too.
    for (auto& [id, op] : ops_) {
      if (!op->finished) FinishOp(*op, absl::UnavailableError(why));
    }
    ops_.clear();
  }

 private:
  enum class State { kIdle = 0, kConnecting = 1, kReady = 2 };
  enum class In { kHeader, kMessage, kPayload };

  struct Op {
    uint64_t id = 0;
    transport::RemoteOp op;
    transport::OpCallback done;
    uint32_t chunks_total = 0;
    uint32_t chunks_done = 0;
    uint32_t outstanding = 0;  // chunks still held by connections
    bool finished = false;     // `done` has run
  };

  struct Chunk {
    uint64_t request_id = 0;
    Op* op = nullptr;        // alive while this chunk exists
    uint64_t op_offset = 0;  // where in the operation this chunk starts
    uint64_t length = 0;
    bool write = false;
    std::array<uint8_t, kRequestHeaderSize> header{};
    uint64_t sent = 0;  // bytes of header + payload sent
    uint64_t send_total() const {
      return kRequestHeaderSize + (write ? length : 0);
    }
    char* local() const { return op->op.local_addr + op_offset; }
  };

  struct Conn {
    int index = 0;
    State state = State::kIdle;
    uint64_t tag = 0;
    UniqueFd fd;
    absl::Time connect_deadline;
    bool needs_connect = false;
    bool want_write = false;
    // Every chunk assigned to this connection, by request id.
    absl::flat_hash_map<uint64_t, std::unique_ptr<Chunk>> chunks;
    std::deque<Chunk*> send_queue;  // not yet completely sent
    uint64_t pending_bytes = 0;     // of the chunks above, for balancing
    // Receiving.
    In in = In::kHeader;
    std::array<uint8_t, kReplyHeaderSize> header{};
    size_t header_have = 0;
    FrameHeader reply;
    std::string message;
    size_t message_have = 0;
    Chunk* receiving = nullptr;
    uint64_t received = 0;
    // For Describe (any thread).
    std::atomic<int> public_state{0};
    std::atomic<uint64_t> posted{0}, completed{0}, errors{0}, generation{0};
    std::atomic<uint32_t> outstanding{0};
  };

  struct Incoming {
    transport::RemoteOp op;
    transport::OpCallback done;
  };

  struct ConnAddresses {
    std::string local, remote;
  };

  using Deadline = std::pair<absl::Time, uint64_t>;

  void TakeIncoming() {
    std::vector<Incoming> batch;
    bool closed;
    {
      absl::MutexLock lock(&mu_);
      batch.swap(incoming_);
      closed = closed_;
    }
    for (Incoming& in : batch) {
      if (closed) {
        in.done(absl::UnavailableError(absl::StrCat(
            "peer ", options_.peer, ": its TCP data channel is closed")));
        continue;
      }
      StartOp(std::move(in));
    }
    for (auto& c : conns_) {
      if (c->needs_connect) {
        c->needs_connect = false;
        if (c->state == State::kIdle && !c->chunks.empty()) StartConnecting(*c);
      }
      if (c->state == State::kReady && !c->send_queue.empty() &&
          !c->want_write) {
        Flush(*c);
      }
    }
  }

  void StartOp(Incoming in) {
    const absl::Time now = absl::Now();
    if (in.op.deadline <= now) {
      in.done(absl::DeadlineExceededError(absl::StrCat(
          "peer ", options_.peer, ": the transfer's deadline passed before "
          "it could be sent")));
      return;
    }
    auto owned = std::make_unique<Op>();
    Op& op = *owned;
    op.id = next_op_id_++;
    op.op = std::move(in.op);
    op.done = std::move(in.done);
    const uint64_t length = op.op.length;
    uint64_t pieces = (length + options_.chunk_bytes - 1) / options_.chunk_bytes;
    if (pieces < conns_.size() && length >= 2 * options_.min_split_bytes) {
      pieces = std::min<uint64_t>(conns_.size(),
                                  length / options_.min_split_bytes);
    }
    pieces = std::max<uint64_t>(pieces, 1);
    const uint64_t piece = (length + pieces - 1) / pieces;
    const bool write = op.op.op == core::OpType::kWrite;
    uint64_t at = 0;
    while (at < length) {
      auto chunk = std::make_unique<Chunk>();
      chunk->request_id = next_request_id_++;
      chunk->op = &op;
      chunk->op_offset = at;
      chunk->length = std::min(piece, length - at);
      chunk->write = write;
      EncodeRequest(write ? FrameType::kWrite : FrameType::kRead,
                    chunk->request_id, op.op.remote.region_id,
                    op.op.remote.tcp_key, op.op.remote.offset + at,
                    chunk->length, chunk->header.data());
      at += chunk->length;
      Conn& conn = LeastLoaded();
      conn.pending_bytes += chunk->length;
      conn.send_queue.push_back(chunk.get());
      conn.posted++;
      conn.outstanding++;
      if (conn.state == State::kIdle) conn.needs_connect = true;
      conn.chunks.emplace(chunk->request_id, std::move(chunk));
      ++op.chunks_total;
      ++op.outstanding;
    }
    if (op.op.deadline != absl::InfiniteFuture()) {
      deadlines_.insert({op.op.deadline, op.id});
    }
    ops_.emplace(op.id, std::move(owned));
  }

  Conn& LeastLoaded() {
    // Start the scan after the last choice, so ties rotate over the
    // connections instead of piling onto the first.
    Conn* best = nullptr;
    const size_t n = conns_.size();
    for (size_t k = 0; k < n; ++k) {
      Conn* c = conns_[(rotate_ + k) % n].get();
      if (best == nullptr || c->pending_bytes < best->pending_bytes) best = c;
    }
    rotate_ = (best->index + 1) % n;
    return *best;
  }

  void StartConnecting(Conn& conn) {
    if (!address_) {
      auto resolved = Resolve(HostPort{options_.host, options_.port});
      if (!resolved.ok()) {
        FailConn(conn, std::string(resolved.status().message()));
        return;
      }
      address_ = *resolved;
    }
    bool in_progress = false;
    auto fd = StartConnect(*address_, &in_progress);
    if (!fd.ok()) {
      address_.reset();  // resolve again next time
      FailConn(conn, absl::StrCat("cannot connect to its data listener ",
                                  JoinHostPort(options_.host, options_.port),
                                  ": ", fd.status().message()));
      return;
    }
    TuneSocket(fd->get(), options_.tuning);
    conn.fd = *std::move(fd);
    conn.tag = next_tag_++;
    conn.generation++;
    conn.state = State::kConnecting;
    conn.public_state = 1;
    conn.connect_deadline = absl::Now() + options_.connect_timeout;
    if (absl::Status s = loop_->Add(conn.fd.get(), EPOLLOUT, conn.tag); !s.ok()) {
      FailConn(conn, std::string(s.message()));
      return;
    }
    if (!in_progress) OnConnected(conn);
  }

  void OnConnected(Conn& conn) {
    conn.state = State::kReady;
    conn.public_state = 2;
    conn.want_write = false;
    loop_->Modify(conn.fd.get(), EPOLLIN, conn.tag).IgnoreError();
    {
      absl::MutexLock lock(&mu_);
      infos_[conn.index] = {LocalAddressOf(conn.fd.get()),
                            RemoteAddressOf(conn.fd.get())};
    }
    spdlog::debug("peer {}: data connection {} up ({} -> {})", options_.peer,
                  conn.index, infos_[conn.index].local,
                  infos_[conn.index].remote);
    Flush(conn);
  }

  // Closes the connection and fails every request on it with UNAVAILABLE
  // (or `status`). The connection is re-opened on next use.
  void FailConn(Conn& conn, const std::string& why,
                absl::Status status = absl::OkStatus()) {
    if (status.ok()) {
      status = absl::UnavailableError(absl::StrCat(
          "peer ", options_.peer, ": TCP data connection ", conn.index,
          conn.state == State::kReady ? " lost: " : " failed: ", why));
    }
    if (!why.empty()) {
      spdlog::warn("{}", std::string(status.message()));
    }
    if (conn.fd) {
      loop_->Remove(conn.fd.get());
      conn.fd.reset();
    }
    conn.state = State::kIdle;
    conn.public_state = why.empty() ? 0 : 3;
    conn.want_write = false;
    conn.needs_connect = false;
    conn.in = In::kHeader;
    conn.header_have = 0;
    conn.receiving = nullptr;
    conn.send_queue.clear();
    if (!why.empty()) {
      absl::MutexLock lock(&mu_);
      last_error_ = std::string(status.message());
    }
    auto chunks = std::move(conn.chunks);
    conn.chunks.clear();
    conn.pending_bytes = 0;
    for (auto& [id, chunk] : chunks) {
      conn.errors++;
      conn.outstanding--;
      Op& op = *chunk->op;
      --op.outstanding;
      if (!op.finished) FinishOp(op, status);
      chunk.reset();
      MaybeForget(op);
    }
  }

  void FinishOp(Op& op, absl::Status status) {
    op.finished = true;
    deadlines_.erase({op.op.deadline, op.id});
    auto done = std::move(op.done);
    done(std::move(status));
  }

  // Forgets an operation once it is finished and no connection holds one
  // of its chunks.
  void MaybeForget(Op& op) {
    if (op.finished && op.outstanding == 0) ops_.erase(op.id);
  }

  // A chunk's reply has been fully received (or it was dropped unsent).
  void CompleteChunk(Conn& conn, Chunk* chunk, const absl::Status& status) {
    Op& op = *chunk->op;
    conn.pending_bytes -= chunk->length;
    conn.outstanding--;
    if (status.ok()) conn.completed++;
    else conn.errors++;
    conn.chunks.erase(chunk->request_id);  // destroys the chunk
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

  // Returns false if the connection failed.
  bool OnReadable(Conn& conn) {
    uint64_t budget = kReadBudget;
    while (budget > 0) {
      iovec iov[2];
      int count = 1;
      size_t first = 0;
      bool discard = false;
      switch (conn.in) {
        case In::kHeader:
          iov[0] = {conn.header.data() + conn.header_have,
                    kReplyHeaderSize - conn.header_have};
          first = iov[0].iov_len;
          break;
        case In::kMessage:
          iov[0] = {conn.message.data() + conn.message_have,
                    conn.message.size() - conn.message_have};
          first = iov[0].iov_len;
          break;
        case In::kPayload: {
          const uint64_t left = conn.receiving->length - conn.received;
          // After the operation finished (deadline, another chunk's
          // error), its memory is no longer ours to write: drop the bytes.
          discard = conn.receiving->op->finished;
          if (discard) {
            if (discard_.empty()) discard_.resize(kDiscardBufferSize);
            first = std::min<uint64_t>(left, discard_.size());
            iov[0] = {discard_.data(), first};
          } else {
            first = std::min<uint64_t>(left, budget);
            iov[0] = {conn.receiving->local() + conn.received, first};
          }
          if (first == left) {
            iov[1] = {conn.header.data(), kReplyHeaderSize};
            count = 2;
          }
          break;
        }
      }
      const size_t asked = first + (count == 2 ? kReplyHeaderSize : 0);
      const ssize_t n = ::readv(conn.fd.get(), iov, count);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        FailConn(conn, std::strerror(errno));
        return false;
      }
      if (n == 0) {
        FailConn(conn, "the peer closed it");
        return false;
      }
      const size_t got = static_cast<size_t>(n);
      budget -= std::min<uint64_t>(budget, got);
      switch (conn.in) {
        case In::kHeader:
          conn.header_have += got;
          break;
        case In::kMessage:
          conn.message_have += got;
          if (conn.message_have == conn.message.size()) {
            if (!OnMessageDone(conn)) return false;
          }
          break;
        case In::kPayload: {
          const size_t body = std::min(got, first);
          conn.received += body;
          conn.header_have = got - body;
          if (conn.received == conn.receiving->length) {
            Chunk* chunk = conn.receiving;
            conn.receiving = nullptr;
            conn.in = In::kHeader;
            CompleteChunk(conn, chunk, absl::OkStatus());
          }
          break;
        }
      }
      if (conn.in == In::kHeader && conn.header_have == kReplyHeaderSize) {
        if (!OnReplyHeader(conn)) return false;
      } else if (conn.in == In::kHeader && conn.header_have > 0) {
        // Refuse garbage on its first bytes instead of waiting for more.
        auto partial = DecodeHeader(absl::Span<const uint8_t>(
            conn.header.data(), conn.header_have));
        if (!partial.ok()) {
          return ProtocolError(conn, partial.status().message());
        }
      }
      if (got < asked) break;
    }
    return true;
  }

  bool ProtocolError(Conn& conn, absl::string_view what) {
    FailConn(conn, absl::StrCat("protocol error: ", what));
    return false;
  }

  bool OnReplyHeader(Conn& conn) {
    conn.header_have = 0;
    auto decoded = DecodeHeader(conn.header);
    if (!decoded.ok()) return ProtocolError(conn, decoded.status().message());
    const FrameHeader& h = **decoded;
    if (IsRequest(h.type)) {
      return ProtocolError(conn, "the peer sent a request to the client");
    }
    auto it = conn.chunks.find(h.request_id);
    if (it == conn.chunks.end()) {
      return ProtocolError(conn, absl::StrCat("reply to unknown request ",
                                              h.request_id));
    }
    Chunk* chunk = it->second.get();
    if ((h.type == FrameType::kWriteReply) != chunk->write) {
      return ProtocolError(conn, absl::StrCat(FrameTypeName(h.type), " to a ",
                                              chunk->write ? "WRITE" : "READ"));
    }
    if (chunk->sent < chunk->send_total()) {
      return ProtocolError(conn, "reply to a request not completely sent");
    }
    if (h.status == 0 && !chunk->write && h.payload_length != chunk->length) {
      return ProtocolError(conn, absl::StrCat("READ reply of ", h.payload_length,
                                              " bytes for a request of ",
                                              chunk->length));
    }
    conn.reply = h;
    conn.receiving = chunk;
    conn.received = 0;
    if (h.message_length > 0) {
      conn.in = In::kMessage;
      conn.message.assign(h.message_length, '\0');
      conn.message_have = 0;
      return true;
    }
    return OnMessageDone(conn);
  }

  // The reply header and its message (if any) are in; payload may follow.
  bool OnMessageDone(Conn& conn) {
    Chunk* chunk = conn.receiving;
    if (conn.reply.status != 0) {
      conn.receiving = nullptr;
      conn.in = In::kHeader;
      const std::string text = conn.reply.message_length > 0
                                   ? conn.message
                                   : std::string("request failed");
      CompleteChunk(conn, chunk,
                    absl::Status(static_cast<absl::StatusCode>(conn.reply.status),
                                 absl::StrCat("peer ", options_.peer, ": ", text)));
      return true;
    }
    if (conn.reply.payload_length == 0) {  // WRITE acknowledged
      conn.receiving = nullptr;
      conn.in = In::kHeader;
      CompleteChunk(conn, chunk, absl::OkStatus());
      return true;
    }
    conn.in = In::kPayload;
    return true;
  }

  // Sends queued requests until the queue is empty or the socket is full.
  void Flush(Conn& conn) {
    if (conn.state != State::kReady) return;
    // Requests of finished operations that have not started go unsent.
    for (auto it = conn.send_queue.begin(); it != conn.send_queue.end();) {
      Chunk* chunk = *it;
      if (chunk->sent == 0 && chunk->op->finished) {
        it = conn.send_queue.erase(it);
        CompleteChunk(conn, chunk, absl::CancelledError("dropped"));
      } else {
        ++it;
      }
    }
    while (!conn.send_queue.empty()) {
      iovec iov[kMaxIov];
      int count = 0;
      uint64_t asked = 0;
      for (Chunk* chunk : conn.send_queue) {
        if (count + 2 > kMaxIov) break;
        uint64_t skip = chunk->sent;
        if (skip < kRequestHeaderSize) {
          iov[count++] = {chunk->header.data() + skip,
                          static_cast<size_t>(kRequestHeaderSize - skip)};
          asked += kRequestHeaderSize - skip;
          skip = 0;
        } else {
          skip -= kRequestHeaderSize;
        }
        if (chunk->write) {
          iov[count++] = {chunk->local() + skip,
                          static_cast<size_t>(chunk->length - skip)};
          asked += chunk->length - skip;
        }
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = count;
      const ssize_t n =
          ::sendmsg(conn.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        FailConn(conn, std::strerror(errno));
        return;
      }
      uint64_t done = static_cast<uint64_t>(n);
      while (done > 0) {
        Chunk* front = conn.send_queue.front();
        const uint64_t rest = front->send_total() - front->sent;
        if (done < rest) {
          front->sent += done;
          break;
        }
        front->sent += rest;
        done -= rest;
        conn.send_queue.pop_front();
      }
      if (static_cast<uint64_t>(n) < asked) break;
    }
    const bool want_write = !conn.send_queue.empty();
    if (want_write != conn.want_write) {
      conn.want_write = want_write;
      loop_->Modify(conn.fd.get(), EPOLLIN | (want_write ? EPOLLOUT : 0u),
                    conn.tag)
          .IgnoreError();
    }
  }

  TcpChannelOptions options_;
  std::unique_ptr<EventLoop> loop_;

  // Loop thread only.
  std::vector<std::unique_ptr<Conn>> conns_;
  std::optional<SocketAddress> address_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Op>> ops_;
  std::set<Deadline> deadlines_;  // of unfinished operations
  uint64_t next_op_id_ = 1;
  uint64_t next_request_id_ = 1;
  uint64_t next_tag_ = 1;
  size_t rotate_ = 0;
  std::vector<char> discard_;

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Incoming> incoming_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  std::vector<ConnAddresses> infos_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<TcpPeerChannel>> TcpPeerChannel::Create(
    TcpChannelOptions options) {
  if (options.port == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer ", options.peer, " gave no TCP data port"));
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  RDMAD_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<TcpPeerChannel>(new TcpPeerChannel(std::move(impl)));
}

TcpPeerChannel::TcpPeerChannel(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

TcpPeerChannel::~TcpPeerChannel() { Close(); }

void TcpPeerChannel::Post(transport::RemoteOp op, transport::OpCallback done) {
  impl_->Post(std::move(op), std::move(done));
}

transport::ChannelInfo TcpPeerChannel::Describe() const {
  return impl_->Describe();
}

void TcpPeerChannel::Close() { impl_->Close(); }

namespace {

class TcpPending final : public transport::Connector::Pending {
 public:
  TcpPending(std::string peer, TcpChannelOptions defaults)
      : peer_(std::move(peer)), options_(std::move(defaults)) {}

  absl::StatusOr<std::unique_ptr<transport::DataChannel>> Finish(
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
      RDMAD_ASSIGN_OR_RETURN(HostPort peer, SplitHostPort(peer_));
      options_.host = peer.host;
    }
    options_.port = static_cast<uint16_t>(response.tcp().port());
    if (response.tcp().connections() > 0) {
      options_.connections = std::min<int>(
          options_.connections, static_cast<int>(response.tcp().connections()));
    }
    RDMAD_ASSIGN_OR_RETURN(auto channel, TcpPeerChannel::Create(options_));
    return std::unique_ptr<transport::DataChannel>(std::move(channel));
  }

 private:
  const std::string peer_;
  TcpChannelOptions options_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<transport::Connector::Pending>>
TcpConnector::Prepare(const std::string& peer, v1::ConnectRequest* request) {
  request->set_transport(v1::TRANSPORT_TCP);
  request->set_tcp_connections(static_cast<uint32_t>(defaults_.connections));
  return std::unique_ptr<Pending>(new TcpPending(peer, defaults_));
}

}  // namespace rdmad::tcp
