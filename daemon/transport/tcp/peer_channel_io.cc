// TcpPeerChannel: one connection's socket. Connects on first use, writes
// queued request frames (header, then a WRITE's payload straight from the
// local region) and reads replies (a READ's payload straight into the local
// region), on the channel's event loop.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/core/region_copy.h"
#include "daemon/transport/tcp/peer_channel_impl.h"
#include "daemon/transport/tcp/socket_util.h"
#include "spdlog/spdlog.h"

namespace rdmad::tcp {
namespace {

constexpr size_t kDiscardBufferSize = 256 << 10;

}  // namespace

using transport::ConnectionState;

void TcpPeerChannel::Impl::StartConnecting(Conn& conn) {
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
  conn.generation++;
  conn.state = ConnectionState::kConnecting;
  conn.public_state = ConnectionState::kConnecting;
  auto watch = loop_->Watch(conn.fd.get(), EPOLLOUT, [this, &conn](uint32_t e) {
    OnSocketEvent(conn, e);
  });
  if (!watch.ok()) {
    FailConn(conn, std::string(watch.status().message()));
    return;
  }
  conn.watch = *watch;
  conn.connect_timer = loop_->RunAt(
      absl::Now() + options_.connect_timeout, [this, &conn] {
        conn.connect_timer = 0;
        if (conn.state != ConnectionState::kConnecting) return;
        FailConn(conn,
                 absl::StrCat("no connection to its data listener ",
                              JoinHostPort(options_.host, options_.port),
                              " within ",
                              absl::FormatDuration(options_.connect_timeout)));
      });
  if (!in_progress) OnConnected(conn);
}

void TcpPeerChannel::Impl::OnSocketEvent(Conn& conn, uint32_t events) {
  if (conn.state == ConnectionState::kConnecting) {
    if (absl::Status s = ConnectResult(conn.fd.get()); !s.ok()) {
      FailConn(conn, absl::StrCat("cannot connect to its data listener ",
                                  JoinHostPort(options_.host, options_.port),
                                  ": ", s.message()));
      return;
    }
    OnConnected(conn);
    return;
  }
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
    if (!OnReadable(conn)) return;
  }
  if (events & EPOLLOUT) Flush(conn);
}

void TcpPeerChannel::Impl::OnConnected(Conn& conn) {
  if (conn.connect_timer != 0) {
    loop_->CancelTimer(conn.connect_timer);
    conn.connect_timer = 0;
  }
  if (!options_.identity.empty()) {
    // Before any request. A new connection's send buffer is empty, so the
    // frame (at most a few hundred bytes) goes in one send.
    const std::string frame = EncodeIdentifyFrame(options_.identity);
    const ssize_t sent = ::send(conn.fd.get(), frame.data(), frame.size(),
                                MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent != static_cast<ssize_t>(frame.size())) {
      FailConn(conn, absl::StrCat("cannot send its IDENTIFY frame: ",
                                  sent < 0 ? std::strerror(errno)
                                           : "the socket took part of it"));
      return;
    }
  }
  conn.state = ConnectionState::kReady;
  conn.public_state = ConnectionState::kReady;
  conn.want_write = false;
  loop_->Rewatch(conn.watch, EPOLLIN).IgnoreError();
  ConnAddresses addresses{LocalAddressOf(conn.fd.get()),
                          RemoteAddressOf(conn.fd.get())};
  spdlog::debug("peer {}: data connection {} up ({} -> {})", options_.peer,
                conn.index, addresses.local, addresses.remote);
  {
    absl::MutexLock lock(&mu_);
    infos_[conn.index] = std::move(addresses);
  }
  Flush(conn);
}

void TcpPeerChannel::Impl::FailConn(Conn& conn, const std::string& why,
                                    absl::Status status) {
  if (status.ok()) {
    status = absl::UnavailableError(absl::StrCat(
        "peer ", options_.peer, ": TCP data connection ", conn.index,
        conn.state == ConnectionState::kReady ? " lost: " : " failed: ", why));
  }
  if (!why.empty()) spdlog::warn("{}", std::string(status.message()));
  if (conn.watch != 0) {
    loop_->Unwatch(conn.watch);
    conn.watch = 0;
  }
  if (conn.connect_timer != 0) {
    loop_->CancelTimer(conn.connect_timer);
    conn.connect_timer = 0;
  }
  conn.fd.reset();
  conn.state = ConnectionState::kIdle;
  conn.public_state =
      why.empty() ? ConnectionState::kIdle : ConnectionState::kError;
  conn.want_write = false;
  conn.in = In::kHeader;
  conn.received_bytes.Clear();
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
    Recycle(std::move(chunk));
    MaybeForget(op);
  }
}

bool TcpPeerChannel::Impl::OnReadable(Conn& conn) {
  const uint64_t generation = conn.generation.load(std::memory_order_relaxed);
  uint64_t budget = kReadBudget;
  while (budget > 0) {
    iovec iov[2];
    int count = 0;
    size_t direct = 0;  // bytes asked straight into the payload's place
    if (conn.in == In::kPayload) {
      // TakeReceived took every buffered byte, so the rest of this payload
      // is the next thing on the socket: read it to its place, and what
      // follows it into the buffer in the same call.
      const uint64_t left = conn.receiving->length - conn.received;
      if (conn.receiving->op->finished) {
        // After the operation finished (deadline, another chunk's error),
        // its memory is no longer ours to write: drop the bytes.
        if (discard_.empty()) discard_.resize(kDiscardBufferSize);
        direct = std::min<uint64_t>(left, discard_.size());
        iov[count++] = {discard_.data(), direct};
      } else {
        direct = std::min<uint64_t>(left, budget);
        iov[count++] = {conn.receiving->local() + conn.received, direct};
      }
      if (direct == left) iov[count++] = conn.received_bytes.Space();
    } else {
      iov[count++] = conn.received_bytes.Space();
    }
    size_t asked = 0;
    for (int i = 0; i < count; ++i) asked += iov[i].iov_len;
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
    const size_t body = std::min(got, direct);
    conn.received_bytes.Commit(got - body);
    if (body > 0) {
      conn.received += body;
      if (conn.received == conn.receiving->length) {
        PayloadDone(conn);
        if (!StillUp(conn, generation)) return false;
      }
    }
    if (!TakeReceived(conn)) return false;
    // A short read means the socket is empty: skip the EAGAIN round trip.
    if (got < asked) break;
  }
  return true;
}

void TcpPeerChannel::Impl::PayloadDone(Conn& conn) {
  Chunk* chunk = conn.receiving;
  conn.receiving = nullptr;
  conn.in = In::kHeader;
  CompleteChunk(conn, chunk, absl::OkStatus());
}

bool TcpPeerChannel::Impl::TakeReceived(Conn& conn) {
  const uint64_t generation = conn.generation.load(std::memory_order_relaxed);
  ReceiveBuffer& buffer = conn.received_bytes;
  while (!buffer.empty()) {
    const absl::Span<const uint8_t> bytes = buffer.data();
    switch (conn.in) {
      case In::kHeader: {
        // Garbage is refused on its first bytes, not after waiting for a
        // whole header that may never come.
        auto decoded = DecodeHeader(bytes);
        if (!decoded.ok()) {
          return ProtocolError(conn, decoded.status().message());
        }
        if (!decoded->has_value()) return true;  // the rest is on its way
        const FrameHeader h = **decoded;
        buffer.Consume(kReplyHeaderSize);
        if (!OnReplyHeader(conn, h)) return false;
        break;
      }
      case In::kMessage: {
        const size_t take = std::min(
            bytes.size(), conn.message.size() - conn.message_have);
        std::memcpy(conn.message.data() + conn.message_have, bytes.data(),
                    take);
        conn.message_have += take;
        buffer.Consume(take);
        if (conn.message_have == conn.message.size() &&
            !OnMessageDone(conn)) {
          return false;
        }
        break;
      }
      case In::kPayload: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(
            bytes.size(), conn.receiving->length - conn.received));
        // A finished operation's memory is no longer ours: dropped.
        Op& op = *conn.receiving->op;
        if (!op.finished) {
          char* to = conn.receiving->local() + conn.received;
          absl::Status copied =
              core::CopyIntoRegion(*op.op.local, to, bytes.data(), take);
          if (!copied.ok()) {
            // The local region (kept in a state directory) was cut short:
            // the READ fails, and the rest of its bytes are dropped.
            FinishOp(op, std::move(copied));
            if (!StillUp(conn, generation)) return false;
          }
        }
        conn.received += take;
        buffer.Consume(take);
        if (conn.received == conn.receiving->length) PayloadDone(conn);
        break;
      }
    }
    // A completion's callback may have posted more work that failed this
    // connection (and even opened a new one): what is buffered was its.
    if (!StillUp(conn, generation)) return false;
  }
  return true;
}

bool TcpPeerChannel::Impl::ProtocolError(Conn& conn, absl::string_view what) {
  FailConn(conn, absl::StrCat("protocol error: ", what));
  return false;
}

bool TcpPeerChannel::Impl::OnReplyHeader(Conn& conn, const FrameHeader& h) {
  if (IsRequest(h.type)) {
    return ProtocolError(conn, "the peer sent a request to the client");
  }
  auto it = conn.chunks.find(h.request_id);
  if (it == conn.chunks.end()) {
    return ProtocolError(
        conn, absl::StrCat("reply to unknown request ", h.request_id));
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
    return ProtocolError(conn,
                         absl::StrCat("READ reply of ", h.payload_length,
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

bool TcpPeerChannel::Impl::OnMessageDone(Conn& conn) {
  Chunk* chunk = conn.receiving;
  if (conn.reply.status != 0) {
    conn.receiving = nullptr;
    conn.in = In::kHeader;
    const std::string text = conn.reply.message_length > 0
                                 ? conn.message
                                 : std::string("request failed");
    CompleteChunk(
        conn, chunk,
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

void TcpPeerChannel::Impl::Flush(Conn& conn) {
  if (conn.state != ConnectionState::kReady) return;
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
    conn.post_calls++;
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
    loop_->Rewatch(conn.watch, EPOLLIN | (want_write ? EPOLLOUT : 0u))
        .IgnoreError();
  }
}

}  // namespace rdmad::tcp
