#include "daemon/transport/tcp/data_server.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/size.h"
#include "common/status_macros.h"
#include "daemon/transport/tcp/event_loop.h"
#include "spdlog/spdlog.h"

namespace rdmad::tcp {
namespace {

constexpr uint64_t kListenTag = 1;
constexpr int kMaxIov = 64;
// Bytes one connection may read per readable event before the loop moves
// on to the others (level-triggered epoll brings it back).
constexpr uint64_t kReadBudget = 16ull << 20;
// Scratch space for the payload of rejected WRITEs.
constexpr size_t kDrainBufferSize = 256 << 10;
// After accept() fails for lack of descriptors, stop accepting this long
// (the listener would otherwise stay readable and spin the loop).
constexpr absl::Duration kAcceptBackoff = absl::Milliseconds(100);

// Compares keys without an early exit, so response timing says nothing
// about how much of a guessed key was right.
bool KeysEqual(uint64_t a, uint64_t b) {
  volatile uint64_t diff = a ^ b;
  return diff == 0;
}

std::string RegionLabel(const core::Region& region) {
  if (region.name().empty()) return absl::StrCat("region #", region.id());
  return absl::StrCat("region '", region.name(), "'");
}

}  // namespace

absl::StatusOr<std::shared_ptr<core::Region>> CheckRequest(
    const core::RegionTable& regions, const FrameHeader& request) {
  RDMAD_ASSIGN_OR_RETURN(std::shared_ptr<core::Region> region,
                         regions.FindExportedById(request.region_id));
  const core::ExportState exported = region->exported();
  if (exported.access == core::RemoteAccess::kNone) {
    // Revoked between the lookup and now.
    return absl::NotFoundError(absl::StrCat(
        "region #", request.region_id, " is no longer exported"));
  }
  if (!KeysEqual(exported.tcp_key, request.key)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the key does not match the current export of ", RegionLabel(*region),
        ": it was exported again or revoked since this key was given out. "
        "Named by a descriptor: get a new one on that node ('rdmactl "
        "descriptor NAME'); named HOST:PORT/NAME: the next transfer looks "
        "it up again"));
  }
  if (!RangeInside(region->size(), request.offset, request.length)) {
    return absl::OutOfRangeError(absl::StrCat(
        "range [", request.offset, ", ", request.offset, "+", request.length,
        ") is outside ", RegionLabel(*region), " of ", region->size(),
        " bytes"));
  }
  const bool write = request.type == FrameType::kWrite;
  if (!core::Allows(exported.access, write ? core::RemoteAccess::kWrite
                                           : core::RemoteAccess::kRead)) {
    return absl::PermissionDeniedError(absl::StrCat(
        RegionLabel(*region), " is exported ",
        write ? "read-only: it accepts no WRITE"
              : "write-only: it accepts no READ"));
  }
  return region;
}

// One event loop thread and the connections it serves.
class TcpDataServer::Worker final : public EventLoop::Delegate {
 public:
  Worker(TcpDataServer* server, int index) : server_(server), index_(index) {}

  absl::Status Init() {
    RDMAD_ASSIGN_OR_RETURN(
        loop_, EventLoop::Create(absl::StrCat("rdmad-tcpsrv", index_), this));
    return absl::OkStatus();
  }
  absl::Status SetListener(UniqueFd fd) {
    listener_ = std::move(fd);
    return loop_->Add(listener_.get(), EPOLLIN, kListenTag);
  }
  void Start() { loop_->Start(); }
  void Stop() { loop_->Stop(); }

  // Hands an accepted connection to this worker. Thread-safe.
  void Adopt(UniqueFd fd) {
    auto shared = std::make_shared<UniqueFd>(std::move(fd));
    loop_->Post([this, shared] { AddConnection(std::move(*shared)); });
  }

  void OnEvent(uint64_t tag, uint32_t events) override {
    if (tag == kListenTag) {
      AcceptAll();
      return;
    }
    auto it = conns_.find(tag);
    if (it == conns_.end()) return;  // closed earlier in this batch
    Conn& conn = *it->second;
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
      if (!OnReadable(conn)) return;
    }
    if (events & EPOLLOUT) Flush(conn);
  }

  absl::Time OnTick(absl::Time now) override {
    if (listener_paused_ && now >= resume_accept_) {
      listener_paused_ = false;
      loop_->Modify(listener_.get(), EPOLLIN, kListenTag).IgnoreError();
    }
    return listener_paused_ ? resume_accept_ : absl::InfiniteFuture();
  }

  void OnStop() override {
    while (!conns_.empty()) Close(*conns_.begin()->second, "");
    if (listener_) {
      loop_->Remove(listener_.get());
      listener_.reset();
    }
  }

 private:
  // One queued reply: header, error message, and for READ the region bytes
  // to send straight from the mapping.
  struct Reply {
    std::array<uint8_t, kReplyHeaderSize> header{};
    std::string message;
    std::shared_ptr<core::Region> region;  // holds the memory while sending
    const char* payload = nullptr;
    uint64_t payload_length = 0;
    uint64_t sent = 0;  // bytes of the whole reply already sent
    uint64_t total() const {
      return kReplyHeaderSize + message.size() + payload_length;
    }
  };

  enum class In { kHeader, kPayload, kDrain };

  struct Conn {
    uint64_t tag = 0;
    UniqueFd fd;
    std::string remote;
    // Receiving.
    In in = In::kHeader;
    std::array<uint8_t, kRequestHeaderSize> header{};
    size_t header_have = 0;
    uint64_t request_id = 0;
    std::shared_ptr<core::Region> region;  // WRITE in progress
    char* dest = nullptr;
    uint64_t left = 0;       // payload bytes still to receive (or drain)
    uint64_t write_len = 0;  // the WRITE's length, for the counters
    absl::Status drain_status;  // why the WRITE being drained was rejected
    // Sending.
    std::deque<Reply> out;
    uint64_t queued_payload = 0;
    bool want_write = false;          // EPOLLOUT registered
    bool reading = true;              // wants EPOLLIN
    bool reading_registered = true;   // EPOLLIN registered
  };

  void AcceptAll() {
    for (;;) {
      UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr,
                            SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
            errno == ENOMEM) {
          spdlog::warn("tcp data server: accept: {}; pausing accepts",
                       std::strerror(errno));
          listener_paused_ = true;
          resume_accept_ = absl::Now() + kAcceptBackoff;
          loop_->Modify(listener_.get(), 0, kListenTag).IgnoreError();
        }
        return;  // EAGAIN: all taken
      }
      if (!server_->options_.allow.empty()) {
        sockaddr_storage peer{};
        socklen_t length = sizeof(peer);
        if (::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&peer),
                          &length) != 0 ||
            !server_->options_.allow.AllowsSockaddr(peer)) {
          Refuse(fd.get(), "not in peer_allow");
          continue;  // closes it
        }
      }
      if (server_->counters_.connections_open.load() >=
          server_->options_.max_open_connections) {
        Refuse(fd.get(), "too many open data connections");
        continue;
      }
      TuneSocket(fd.get(), server_->options_.tuning);
      server_->counters_.connections_accepted++;
      auto& workers = server_->workers_;
      Worker* target = workers[next_worker_++ % workers.size()].get();
      if (target == this) {
        AddConnection(std::move(fd));
      } else {
        target->Adopt(std::move(fd));
      }
    }
  }

  // Counts a connection closed at accept. Logs the first and then every
  // 1000th, so that a peer knocking in a loop cannot flood the log.
  void Refuse(int fd, absl::string_view why) {
    const uint64_t n = ++server_->counters_.refused;
    if (n % 1000 == 1) {
      spdlog::warn("tcp data server: refused a connection from {}: {} ({} "
                   "refused so far)",
                   RemoteAddressOf(fd), std::string(why), n);
    }
  }

  void AddConnection(UniqueFd fd) {
    auto conn = std::make_unique<Conn>();
    conn->tag = next_tag_++;
    conn->remote = RemoteAddressOf(fd.get());
    conn->fd = std::move(fd);
    if (absl::Status s = loop_->Add(conn->fd.get(), EPOLLIN, conn->tag);
        !s.ok()) {
      spdlog::warn("tcp data server: cannot watch connection from {}: {}",
                   conn->remote, s.ToString());
      return;
    }
    spdlog::debug("tcp data server: connection from {}", conn->remote);
    server_->counters_.connections_open++;
    conns_.emplace(conn->tag, std::move(conn));
  }

  void Close(Conn& conn, absl::string_view why) {
    if (!why.empty()) {
      spdlog::info("tcp data server: closing connection from {}: {}",
                   conn.remote, std::string(why));
    }
    loop_->Remove(conn.fd.get());
    server_->counters_.connections_open--;
    conns_.erase(conn.tag);  // closes the socket, releases held regions
  }

  // Reads as much as is there (up to the budget). Returns false if the
  // connection was closed.
  bool OnReadable(Conn& conn) {
    uint64_t budget = kReadBudget;
    while (conn.reading && budget > 0) {
      iovec iov[2];
      int count = 1;
      size_t first = 0;  // bytes asked for in iov[0]
      switch (conn.in) {
        case In::kHeader:
          iov[0] = {conn.header.data() + conn.header_have,
                    kRequestHeaderSize - conn.header_have};
          first = iov[0].iov_len;
          break;
        case In::kPayload:
          first = std::min<uint64_t>(conn.left, budget);
          iov[0] = {conn.dest, first};
          break;
        case In::kDrain:
          if (drain_.empty()) drain_.resize(kDrainBufferSize);
          first = std::min<uint64_t>(conn.left, drain_.size());
          iov[0] = {drain_.data(), first};
          break;
      }
      if (conn.in != In::kHeader && first == conn.left) {
        // The body ends within this read: pick up the next request's
        // header in the same call.
        iov[1] = {conn.header.data(), kRequestHeaderSize};
        count = 2;
      }
      const size_t asked = first + (count == 2 ? kRequestHeaderSize : 0);
      const ssize_t n = ::readv(conn.fd.get(), iov, count);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        Close(conn, std::strerror(errno));
        return false;
      }
      if (n == 0) {
        Close(conn, conn.in == In::kHeader && conn.header_have == 0
                        ? ""
                        : "peer closed the connection mid-frame");
        return false;
      }
      budget -= std::min<uint64_t>(budget, n);
      size_t got = static_cast<size_t>(n);
      if (conn.in == In::kHeader) {
        conn.header_have += got;
      } else {
        const size_t body = std::min(got, first);
        conn.left -= body;
        if (conn.in == In::kPayload) conn.dest += body;
        conn.header_have = got - body;
        if (conn.left == 0) FinishBody(conn);
      }
      if (conn.header_have == kRequestHeaderSize) {
        if (!OnHeader(conn)) return false;
      } else if (conn.header_have > 0 && !CheckPartialHeader(conn)) {
        return false;
      }
      // A short read means the socket is empty: skip the EAGAIN round trip.
      if (got < asked) break;
    }
    const uint64_t tag = conn.tag;
    Flush(conn);  // may close it
    return conns_.contains(tag);
  }

  // The payload of a WRITE (or the drained payload of a rejected one) is
  // complete.
  // A reply goes out only once its whole request has arrived, so the
  // client never sees the answer to a WRITE it is still sending.
  void FinishBody(Conn& conn) {
    if (conn.in == In::kPayload) {
      server_->counters_.bytes_written += conn.write_len;
      QueueReply(conn, FrameType::kWriteReply, conn.request_id,
                 absl::OkStatus());
      conn.region.reset();
      conn.dest = nullptr;
    } else {
      QueueReply(conn, FrameType::kWriteReply, conn.request_id,
                 conn.drain_status);
      conn.drain_status = absl::OkStatus();
    }
    conn.in = In::kHeader;
  }

  // Turns away a peer that speaks something else as soon as its first
  // bytes prove it, rather than waiting for a whole header that may never
  // come. Returns false if the connection was closed.
  bool CheckPartialHeader(Conn& conn) {
    auto decoded = DecodeHeader(absl::Span<const uint8_t>(conn.header.data(),
                                                          conn.header_have));
    absl::string_view why;
    if (!decoded.ok()) {
      why = decoded.status().message();
    } else if (conn.header_have >= 6 &&
               !IsRequest(static_cast<FrameType>(conn.header[5]))) {
      why = "peer sent a reply frame to the server";
    } else {
      return true;
    }
    server_->counters_.protocol_errors++;
    Close(conn, why);
    return false;
  }

  // A whole request header is in conn.header. Returns false if the
  // connection was closed.
  bool OnHeader(Conn& conn) {
    conn.header_have = 0;
    auto decoded = DecodeHeader(conn.header);
    if (!decoded.ok() || !decoded->has_value() ||
        !IsRequest((*decoded)->type)) {
      server_->counters_.protocol_errors++;
      Close(conn, decoded.ok() ? "peer sent a reply frame to the server"
                               : std::string(decoded.status().message()));
      return false;
    }
    const FrameHeader& h = **decoded;
    server_->counters_.requests++;
    auto region = CheckRequest(*server_->regions_, h);
    const bool write = h.type == FrameType::kWrite;
    if (!region.ok()) {
      server_->counters_.rejected++;
      spdlog::debug("tcp data server: {} from {} rejected: {}",
                    std::string(FrameTypeName(h.type)), conn.remote,
                    region.status().ToString());
      if (write) {
        // Drop the payload (answering after it), so the connection stays
        // usable.
        conn.in = In::kDrain;
        conn.request_id = h.request_id;
        conn.left = h.length;
        conn.drain_status = region.status();
      } else {
        QueueReply(conn, FrameType::kReadReply, h.request_id, region.status());
      }
      return true;
    }
    if (write) {
      conn.in = In::kPayload;
      conn.request_id = h.request_id;
      conn.region = *std::move(region);
      conn.dest = conn.region->data() + h.offset;
      conn.left = h.length;
      conn.write_len = h.length;
      return true;
    }
    Reply& reply = conn.out.emplace_back();
    EncodeReply(FrameType::kReadReply, h.request_id, 0, 0, h.length,
                reply.header.data());
    reply.region = *std::move(region);
    reply.payload = reply.region->data() + h.offset;
    reply.payload_length = h.length;
    conn.queued_payload += h.length;
    server_->counters_.bytes_read += h.length;
    if (conn.queued_payload > server_->options_.max_queued_reply_bytes) {
      // Backpressure: the peer is not reading its replies fast enough.
      conn.reading = false;
      UpdateInterest(conn);
    }
    return true;
  }

  void QueueReply(Conn& conn, FrameType type, uint64_t request_id,
                  const absl::Status& status) {
    Reply& reply = conn.out.emplace_back();
    reply.message = std::string(ClipMessage(status.message()));
    EncodeReply(type, request_id, static_cast<uint32_t>(status.code()),
                static_cast<uint32_t>(reply.message.size()), 0,
                reply.header.data());
  }

  // Sends queued replies until done or the socket is full.
  void Flush(Conn& conn) {
    while (!conn.out.empty()) {
      iovec iov[kMaxIov];
      int count = 0;
      uint64_t asked = 0;
      for (auto it = conn.out.begin(); it != conn.out.end() && count + 3 <= kMaxIov;
           ++it) {
        uint64_t skip = it->sent;
        auto add = [&](const void* base, uint64_t len) {
          if (skip >= len) {
            skip -= len;
            return;
          }
          iov[count++] = {const_cast<char*>(static_cast<const char*>(base)) + skip,
                          static_cast<size_t>(len - skip)};
          asked += len - skip;
          skip = 0;
        };
        add(it->header.data(), kReplyHeaderSize);
        if (!it->message.empty()) add(it->message.data(), it->message.size());
        if (it->payload_length > 0) add(it->payload, it->payload_length);
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = count;
      const ssize_t n = ::sendmsg(conn.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        Close(conn, std::strerror(errno));
        return;
      }
      uint64_t done = static_cast<uint64_t>(n);
      while (done > 0) {
        Reply& front = conn.out.front();
        const uint64_t rest = front.total() - front.sent;
        if (done < rest) {
          front.sent += done;
          break;
        }
        done -= rest;
        conn.queued_payload -= front.payload_length;
        conn.out.pop_front();
      }
      if (static_cast<uint64_t>(n) < asked) break;  // socket buffer full
    }
    if (!conn.reading &&
        conn.queued_payload <= server_->options_.max_queued_reply_bytes / 2) {
      conn.reading = true;
    }
    UpdateInterest(conn);
    // Data that arrived while reading was paused is still in the socket;
    // level-triggered epoll reports it again now that EPOLLIN is back.
  }

  void UpdateInterest(Conn& conn) {
    const bool want_write = !conn.out.empty();
    const uint32_t events =
        (conn.reading ? EPOLLIN : 0u) | (want_write ? EPOLLOUT : 0u);
    const uint32_t before =
        (conn.reading_registered ? EPOLLIN : 0u) | (conn.want_write ? EPOLLOUT : 0u);
    if (events == before) return;
    conn.want_write = want_write;
    conn.reading_registered = conn.reading;
    loop_->Modify(conn.fd.get(), events, conn.tag).IgnoreError();
  }

  TcpDataServer* const server_;  // Not owned; owns this worker.
  const int index_;
  std::unique_ptr<EventLoop> loop_;
  UniqueFd listener_;
  bool listener_paused_ = false;
  absl::Time resume_accept_;
  uint64_t next_tag_ = kListenTag + 1;
  size_t next_worker_ = 0;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::vector<char> drain_;
};

TcpDataServer::TcpDataServer(const core::RegionTable* regions,
                             TcpDataServerOptions options)
    : regions_(regions), options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<TcpDataServer>> TcpDataServer::Start(
    const core::RegionTable* regions, TcpDataServerOptions options) {
  RDMAD_ASSIGN_OR_RETURN(HostPort listen, SplitHostPort(options.listen));
  auto server = std::unique_ptr<TcpDataServer>(
      new TcpDataServer(regions, std::move(options)));
  auto listener = Listen(listen);
  if (!listener.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", server->options_.listen,
        " for TCP data connections (", listener.status().message(),
        "): is the port in use? pick another --data_listen"));
  }
  server->port_ = LocalPortOf(listener->get());
  server->address_ = JoinHostPort(listen.host, server->port_);
  server->advertise_host_ = server->options_.advertise_host;
  if (server->advertise_host_.empty() && !IsWildcardHost(listen.host)) {
    server->advertise_host_ = listen.host;
  }
  const int threads = std::max(1, server->options_.threads);
  for (int i = 0; i < threads; ++i) {
    auto worker = std::make_unique<Worker>(server.get(), i);
    RDMAD_RETURN_IF_ERROR(worker->Init());
    server->workers_.push_back(std::move(worker));
  }
  RDMAD_RETURN_IF_ERROR(server->workers_[0]->SetListener(*std::move(listener)));
  for (auto& worker : server->workers_) worker->Start();
  spdlog::info("TCP data listener on {} ({} thread{})", server->address_,
               threads, threads == 1 ? "" : "s");
  return server;
}

TcpDataServer::~TcpDataServer() { Stop(); }

void TcpDataServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  // Worker 0 holds the listener; stopping it first stops new connections
  // being handed to the others.
  for (auto& worker : workers_) worker->Stop();
}

absl::Status TcpDataServer::Accept(const v1::ConnectRequest& request,
                                   v1::ConnectResponse* response) {
  if (stopped_) {
    return absl::UnavailableError("the TCP data listener is shutting down");
  }
  v1::TcpEndpoint* tcp = response->mutable_tcp();
  tcp->set_host(advertise_host_);
  tcp->set_port(port_);
  const uint32_t wanted = request.tcp_connections() == 0
                              ? 1
                              : request.tcp_connections();
  tcp->set_connections(std::min(wanted, options_.max_connections_per_peer));
  return absl::OkStatus();
}

TcpDataServer::Stats TcpDataServer::stats() const {
  Stats s;
  s.connections_accepted = counters_.connections_accepted.load();
  s.connections_open = counters_.connections_open.load();
  s.requests = counters_.requests.load();
  s.rejected = counters_.rejected.load();
  s.bytes_written = counters_.bytes_written.load();
  s.bytes_read = counters_.bytes_read.load();
  s.protocol_errors = counters_.protocol_errors.load();
  s.refused = counters_.refused.load();
  return s;
}

}  // namespace rdmad::tcp
