#include "daemon/transport/tcp/data_connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/size.h"
#include "common/status_macros.h"
#include "daemon/core/region_copy.h"
#include "daemon/transport/tcp/data_server.h"
#include "daemon/transport/tcp/socket_util.h"
#include "spdlog/spdlog.h"

namespace rdmad::tcp {
namespace {

// Scratch space for the payload of rejected WRITEs.
constexpr size_t kDrainBufferSize = 256 << 10;

// One per loop thread, shared by its connections: what lands there is
// thrown away. (One per connection cost 256 KiB for each connection that
// had sent the 48-byte header of a rejected WRITE, up to 256 MiB held for
// as long as max_open_connections such connections stayed idle.)
char* DrainBuffer() {
  thread_local std::vector<char> buffer(kDrainBufferSize);
  return buffer.data();
}

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
  const bool write = IsWrite(request.type);
  if (!core::Allows(exported.access, write ? core::RemoteAccess::kWrite
                                           : core::RemoteAccess::kRead)) {
    return absl::PermissionDeniedError(absl::StrCat(
        RegionLabel(*region), " is exported ",
        write ? "read-only: it accepts no WRITE"
              : "write-only: it accepts no READ"));
  }
  if (!region->memory().cpu_mapped()) {
    return absl::FailedPreconditionError(absl::StrCat(
        RegionLabel(*region),
        " is a dma-buf its daemon cannot map for the "
        "CPU (GPU memory): the TCP transport cannot reach it, only RDMA "
        "devices can. Use the verbs transport between these nodes"));
  }
  return region;
}

DataConnection::DataConnection(
    UniqueFd fd, runtime::EventLoop* loop, const DataServerContext* context,
    absl::AnyInvocable<void(DataConnection*)> closed)
    : loop_(loop),
      ctx_(context),
      closed_callback_(std::move(closed)),
      fd_(std::move(fd)),
      remote_(RemoteAddressOf(fd_.get())) {
  socklen_t length = sizeof(peer_);
  if (::getpeername(fd_.get(), reinterpret_cast<sockaddr*>(&peer_),
                    &length) != 0) {
    peer_.ss_family = AF_UNSPEC;  // admitted only by "*" entries
  }
  writer_ = std::make_shared<const std::string>(
      peer_.ss_family == AF_UNSPEC ? remote_ : HostOf(peer_));
  ctx_->counters->connections_open++;
}

DataConnection::~DataConnection() {
  if (watch_ != 0) loop_->Unwatch(watch_);
  if (stall_timer_ != 0) loop_->CancelTimer(stall_timer_);
  ctx_->counters->connections_open--;
}

absl::Status DataConnection::Start() {
  RDMAD_ASSIGN_OR_RETURN(
      watch_, loop_->Watch(fd_.get(), EPOLLIN,
                           [this](uint32_t events) { OnEvent(events); }));
  spdlog::debug("tcp data server: connection from {}", remote_);
  last_progress_ = absl::Now();
  ArmStallCheck(last_progress_ + ctx_->options->stall_timeout);
  return absl::OkStatus();
}

void DataConnection::ArmStallCheck(absl::Time when) {
  if (ctx_->options->stall_timeout <= absl::ZeroDuration()) return;
  stall_timer_ = loop_->RunAt(when, [this] {
    stall_timer_ = 0;
    CheckStall();
  });
}

void DataConnection::CheckStall() {
  if (closed_) return;
  const absl::Duration timeout = ctx_->options->stall_timeout;
  const absl::Time now = absl::Now();
  if (!UnderWay()) {
    // Idle between requests: nothing to time. Look again a timeout from
    // now (a check per connection per timeout costs nothing).
    ArmStallCheck(now + timeout);
    return;
  }
  if (now - last_progress_ < timeout) {
    ArmStallCheck(last_progress_ + timeout);
    return;
  }
  const char* what = !got_request_         ? "before sending a request"
                     : !out_.empty()       ? "with replies it does not read"
                                           : "in the middle of a request";
  ctx_->counters->stalled++;
  Close(absl::StrCat("no byte moved for ", absl::FormatDuration(timeout),
                     " ", what, " (stall_timeout)"));
}

void DataConnection::Close(absl::string_view why) {
  if (closed_) return;
  closed_ = true;
  if (!why.empty()) {
    // Anyone who reaches the port can make connections close this way (a
    // bad magic, half a frame), as fast as it can connect: log the first
    // and then every 1000th, as refusals at accept are, so that it cannot
    // flood the log.
    const uint64_t n = ++ctx_->counters->closed_on_error;
    spdlog::log(n % 1000 == 1 ? spdlog::level::info : spdlog::level::debug,
                "tcp data server: closing connection from {}: {} ({} closed "
                "on errors so far; the first and every 1000th are logged at "
                "info)",
                remote_, std::string(why), n);
  }
  if (watch_ != 0) {
    loop_->Unwatch(watch_);
    watch_ = 0;
  }
  fd_.reset();
  region_.reset();
  out_.clear();  // releases the regions replies held
  if (stall_timer_ != 0) {
    loop_->CancelTimer(stall_timer_);
    stall_timer_ = 0;
  }
  // The owner destroys us after the handler that closed us has returned.
  loop_->Post([this] { closed_callback_(this); });
}

void DataConnection::OnEvent(uint32_t events) {
  if (closed_) return;
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
    if (!OnReadable()) return;
  }
  if (events & EPOLLOUT) {
    Flush();
    // Requests read before reading paused wait in the buffer: the socket
    // may hold nothing more to report them by.
    if (BufferedWork()) OnReadable();
  }
}

bool DataConnection::BufferedWork() const {
  return !closed_ && reading_ && !received_.empty() &&
         (in_ != In::kHeader || received_.size() >= kRequestHeaderSize);
}

bool DataConnection::OnReadable() {
  do {
    if (!TakeReceived() || !ReadSocket()) return false;
    Flush();  // may close, and may resume reading paused meanwhile
    if (closed_) return false;
  } while (BufferedWork());
  return true;
}

bool DataConnection::ReadSocket() {
  uint64_t budget = kReadBudget;
  while (reading_ && budget > 0) {
    iovec iov[2];
    int count = 0;
    size_t direct = 0;  // bytes asked straight into iov[0]
    // Payload lands in the region only under a use of the export the WRITE
    // was checked against: a revocation waits for this readv, and once it
    // is done no later one lands (the rest is drained instead).
    std::optional<core::ExportUse> use;
    if (in_ == In::kPayload && !BeginWriteUse(use)) continue;
    // TakeReceived took every buffered byte unless a header is incomplete,
    // so a body's rest is the next thing on the socket: it is read to its
    // place, and what follows it into the buffer in the same call.
    switch (in_) {
      case In::kHeader:
        break;
      case In::kPayload:
        direct = std::min<uint64_t>(left_, budget);
        iov[count++] = {dest_, direct};
        break;
      case In::kDrain:
        direct = std::min<uint64_t>(left_, kDrainBufferSize);
        iov[count++] = {DrainBuffer(), direct};
        break;
      case In::kIdentity:
        direct = left_;
        iov[count++] = {identity_.data() + (identity_.size() - left_), direct};
        break;
    }
    if (in_ == In::kHeader || direct == left_) {
      iov[count++] = received_.Space();
    }
    size_t asked = 0;
    for (int i = 0; i < count; ++i) asked += iov[i].iov_len;
    const ssize_t n = ::readv(fd_.get(), iov, count);
    use.reset();
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      Close(std::strerror(errno));
      return false;
    }
    if (n == 0) {
      Close(in_ == In::kHeader && received_.empty()
                ? ""
                : "peer closed the connection mid-frame");
      return false;
    }
    budget -= std::min<uint64_t>(budget, n);
    Progressed();
    const size_t got = static_cast<size_t>(n);
    const size_t body = std::min(got, direct);
    received_.Commit(got - body);
    if (body > 0) {
      left_ -= body;
      if (in_ == In::kPayload) dest_ += body;
      if (left_ == 0 && !FinishBody()) return false;
    }
    if (!TakeReceived()) return false;
    // A short read means the socket is empty: skip the EAGAIN round trip.
    if (got < asked) break;
  }
  return true;
}

bool DataConnection::BeginWriteUse(std::optional<core::ExportUse>& use) {
  auto begun = region_->BeginExportUse(key_, core::RemoteAccess::kWrite);
  if (begun.ok()) {
    use.emplace(*std::move(begun));
    return true;
  }
  ctx_->counters->rejected++;
  in_ = In::kDrain;
  drain_status_ = begun.status();
  region_.reset();
  dest_ = nullptr;
  return false;
}

bool DataConnection::TakeReceived() {
  while (reading_ && !received_.empty()) {
    const absl::Span<const uint8_t> bytes = received_.data();
    const size_t take = static_cast<size_t>(
        std::min<uint64_t>(bytes.size(), left_));
    switch (in_) {
      case In::kHeader: {
        auto decoded = DecodeHeader(bytes);
        if (decoded.ok() && !decoded->has_value()) {
          return CheckPartialHeader();  // the rest is on its way
        }
        if (!OnHeader(decoded)) return false;
        received_.Consume(kRequestHeaderSize);
        continue;
      }
      case In::kPayload: {
        std::optional<core::ExportUse> use;
        if (!BeginWriteUse(use)) continue;  // drained instead
        if (absl::Status s =
                core::CopyIntoRegion(*region_, dest_, bytes.data(), take);
            !s.ok()) {
          // A kept region's file was cut short under it: the rest of the
          // WRITE is drained and answered with why.
          ctx_->counters->rejected++;
          in_ = In::kDrain;
          drain_status_ = std::move(s);
          region_.reset();
          dest_ = nullptr;
          continue;
        }
        dest_ += take;
        break;
      }
      case In::kDrain:
        break;
      case In::kIdentity:
        std::memcpy(identity_.data() + (identity_.size() - left_),
                    bytes.data(), take);
        break;
    }
    left_ -= take;
    received_.Consume(take);
    if (left_ == 0 && !FinishBody()) return false;
  }
  return true;
}

// The payload of a WRITE (or the drained payload of a rejected one) is
// complete. A reply goes out only once its whole request has arrived, so
// the client never sees the answer to a WRITE it is still sending.
bool DataConnection::FinishBody() {
  if (in_ == In::kIdentity) {
    auto identity = ParseIdentity(identity_);
    identity_.clear();
    if (!identity.ok()) {
      ctx_->counters->protocol_errors++;
      Close(identity.status().message());
      return false;
    }
    writer_ = std::make_shared<const std::string>(*std::move(identity));
  } else if (in_ == In::kPayload) {
    ctx_->counters->bytes_written += write_len_;
    if (write_immediate_.has_value() && ctx_->options->notifications != nullptr) {
      // The data is in place: the owner is told (at once, or once it has
      // room) before the reply, which is OK from here on.
      ctx_->options->notifications->Notify(
          *region_, write_offset_, write_len_, *write_immediate_,
          core::NotificationWriter{.transport = core::TransportKind::kTcp,
                                   .address = writer_});
    }
    QueueReply(FrameType::kWriteReply, request_id_, absl::OkStatus());
    region_.reset();
    dest_ = nullptr;
  } else {
    QueueReply(FrameType::kWriteReply, request_id_, drain_status_);
    drain_status_ = absl::OkStatus();
  }
  in_ = In::kHeader;
  return true;
}

bool DataConnection::StartIdentity(const FrameHeader& h) {
  if (got_request_) {
    ctx_->counters->protocol_errors++;
    Close("IDENTIFY after the first frame of the connection");
    return false;
  }
  in_ = In::kIdentity;
  identity_.assign(h.length, '\0');
  left_ = h.length;
  return true;
}

// Turns away a peer that speaks something else as soon as its first bytes
// prove it, rather than waiting for a whole header that may never come
// (DecodeHeader refused what it could already).
bool DataConnection::CheckPartialHeader() {
  const absl::Span<const uint8_t> bytes = received_.data();
  if (bytes.size() < 6 || IsRequest(static_cast<FrameType>(bytes[5]))) {
    return true;
  }
  ctx_->counters->protocol_errors++;
  Close("peer sent a reply frame to the server");
  return false;
}

bool DataConnection::OnHeader(
    const absl::StatusOr<std::optional<FrameHeader>>& decoded) {
  if (!decoded.ok() || !decoded->has_value() || !IsRequest((*decoded)->type)) {
    ctx_->counters->protocol_errors++;
    Close(decoded.ok() ? "peer sent a reply frame to the server"
                       : std::string(decoded.status().message()));
    return false;
  }
  const FrameHeader& h = **decoded;
  if (h.type == FrameType::kIdentify) {
    const bool started = StartIdentity(h);
    got_request_ = true;
    return started;
  }
  got_request_ = true;
  ctx_->counters->requests++;
  auto region = CheckRequest(*ctx_->regions, h);
  if (region.ok() && !(*region)->AdmitsDataPeer(peer_)) {
    region = absl::PermissionDeniedError(absl::StrCat(
        "the export of ", RegionLabel(**region),
        " does not admit data connections from ", remote_,
        ": ask its owner to add this daemon to its access list (rdmactl "
        "export --allow)"));
  }
  const bool write = IsWrite(h.type);
  if (!region.ok()) {
    ctx_->counters->rejected++;
    spdlog::debug("tcp data server: {} from {} rejected: {}",
                  std::string(FrameTypeName(h.type)), remote_,
                  region.status().ToString());
    if (write) {
      // Drop the payload (answering after it), so the connection stays
      // usable.
      in_ = In::kDrain;
      request_id_ = h.request_id;
      left_ = h.length;
      drain_status_ = region.status();
    } else {
      QueueReply(FrameType::kReadReply, h.request_id, region.status());
    }
    return true;
  }
  if (write) {
    in_ = In::kPayload;
    request_id_ = h.request_id;
    region_ = *std::move(region);
    key_ = h.key;
    dest_ = region_->data() + h.offset;
    left_ = h.length;
    write_len_ = h.length;
    write_offset_ = h.offset;
    write_immediate_.reset();
    if (h.type == FrameType::kWriteImm) write_immediate_ = h.immediate;
    return true;
  }
  Reply& reply = out_.emplace_back();
  EncodeReply(FrameType::kReadReply, h.request_id, 0, 0, h.length,
              reply.header.data());
  reply.region = *std::move(region);
  reply.request_id = h.request_id;
  reply.key = h.key;
  reply.payload = reply.region->data() + h.offset;
  reply.payload_length = h.length;
  queued_payload_ += h.length;
  queued_memory_ += reply.memory();
  ctx_->counters->bytes_read += h.length;
  PauseReadingIfBacklogged();
  return true;
}

void DataConnection::QueueReply(FrameType type, uint64_t request_id,
                                const absl::Status& status) {
  Reply& reply = out_.emplace_back();
  reply.message = std::string(ClipMessage(status.message()));
  EncodeReply(type, request_id, static_cast<uint32_t>(status.code()),
              static_cast<uint32_t>(reply.message.size()), 0,
              reply.header.data());
  queued_memory_ += reply.memory();
  PauseReadingIfBacklogged();
}

void DataConnection::PauseReadingIfBacklogged() {
  if (!reading_) return;
  if (queued_payload_ > ctx_->options->max_queued_reply_bytes ||
      queued_memory_ > ctx_->options->max_queued_reply_memory) {
    // Backpressure: the peer is not reading its replies fast enough.
    reading_ = false;
    UpdateInterest();
  }
}

void DataConnection::PopReply() {
  queued_payload_ -= out_.front().payload_length;
  queued_memory_ -= out_.front().memory();
  out_.pop_front();
}

bool DataConnection::RevokedReply(Reply& reply, const absl::Status& why) {
  ctx_->counters->rejected++;
  ctx_->counters->bytes_read -= reply.payload_length;
  if (reply.sent > 0) {
    Close(absl::StrCat("a READ reply was cut off: ", why.message()));
    return false;
  }
  queued_payload_ -= reply.payload_length;
  queued_memory_ -= reply.memory();
  reply.region.reset();
  reply.payload = nullptr;
  reply.payload_length = 0;
  reply.message = std::string(ClipMessage(why.message()));
  queued_memory_ += reply.memory();
  EncodeReply(FrameType::kReadReply, reply.request_id,
              static_cast<uint32_t>(why.code()),
              static_cast<uint32_t>(reply.message.size()), 0,
              reply.header.data());
  return true;
}

void DataConnection::Flush() {
  // READ payload leaves the region only under a use of the export it was
  // checked against (see OnReadable); held across one sendmsg, which
  // copies the bytes into the socket.
  std::vector<core::ExportUse> uses;
  while (!out_.empty()) {
    iovec iov[kMaxIov];
    int count = 0;
    uint64_t asked = 0;
    uses.clear();
    bool revoked_front = false;
    for (auto it = out_.begin(); it != out_.end() && count + 3 <= kMaxIov;
         ++it) {
      if (it->payload_length > 0) {
        auto use = it->region->BeginExportUse(it->key, core::RemoteAccess::kRead);
        if (!use.ok()) {
          if (it == out_.begin()) {
            if (!RevokedReply(*it, use.status())) return;
            revoked_front = true;
          }
          break;  // send what comes before it first
        }
        uses.push_back(*std::move(use));
      }
      uint64_t skip = it->sent;
      auto add = [&](const void* base, uint64_t len) {
        if (skip >= len) {
          skip -= len;
          return;
        }
        iov[count++] = {
            const_cast<char*>(static_cast<const char*>(base)) + skip,
            static_cast<size_t>(len - skip)};
        asked += len - skip;
        skip = 0;
      };
      add(it->header.data(), kReplyHeaderSize);
      if (!it->message.empty()) add(it->message.data(), it->message.size());
      if (it->payload_length > 0) add(it->payload, it->payload_length);
    }
    if (revoked_front) continue;  // now an error reply: build again
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    const ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    // The bytes are in the socket (or not sent at all): the region is no
    // longer being read. Before the replies (and their regions) go.
    uses.clear();
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      Close(std::strerror(errno));
      return;
    }
    uint64_t done = static_cast<uint64_t>(n);
    if (done > 0) Progressed();
    while (done > 0) {
      Reply& front = out_.front();
      const uint64_t rest = front.total() - front.sent;
      if (done < rest) {
        front.sent += done;
        break;
      }
      done -= rest;
      PopReply();
    }
    if (static_cast<uint64_t>(n) < asked) break;  // socket buffer full
  }
  if (!reading_ &&
      queued_payload_ <= ctx_->options->max_queued_reply_bytes / 2 &&
      queued_memory_ <= ctx_->options->max_queued_reply_memory / 2) {
    reading_ = true;
  }
  UpdateInterest();
  // Data that arrived while reading was paused is still in the socket;
  // level-triggered epoll reports it again now that EPOLLIN is back.
}

void DataConnection::UpdateInterest() {
  if (closed_) return;
  const bool want_write = !out_.empty();
  const uint32_t events =
      (reading_ ? EPOLLIN : 0u) | (want_write ? EPOLLOUT : 0u);
  const uint32_t before = (reading_registered_ ? EPOLLIN : 0u) |
                          (want_write_ ? EPOLLOUT : 0u);
  if (events == before) return;
  want_write_ = want_write;
  reading_registered_ = reading_;
  loop_->Rewatch(watch_, events).IgnoreError();
}

}  // namespace rdmad::tcp
