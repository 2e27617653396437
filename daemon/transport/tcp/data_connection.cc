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
#include "daemon/transport/tcp/data_server.h"
#include "daemon/transport/tcp/socket_util.h"
#include "spdlog/spdlog.h"

namespace rdmad::tcp {
namespace {

// Compares keys without an early exit, so response timing says nothing
// about how much of a guessed key was right.
bool KeysEqual(uint64_t a, uint64_t b) {
  volatile uint64_t diff = a ^ b;
  return diff == 0;
}

}  // namespace

std::string RegionLabel(const core::Region& region) {
  if (region.name().empty()) return absl::StrCat("region #", region.id());
  return absl::StrCat("region '", region.name(), "'");
}

absl::Status CheckRequestAgainst(const core::Region& region,
                                 const core::ExportTerms& exported,
                                 const FrameHeader& request) {
  if (exported.access == core::RemoteAccess::kNone) {
    // Revoked between the lookup and now.
    return absl::NotFoundError(absl::StrCat(
        "region #", request.region_id, " is no longer exported"));
  }
  if (!KeysEqual(exported.tcp_key, request.key)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the key does not match the current export of ", RegionLabel(region),
        ": it was exported again or revoked since this key was given out. "
        "Named by a descriptor: get a new one on that node ('rdmactl "
        "descriptor NAME'); named HOST:PORT/NAME: the next transfer looks "
        "it up again"));
  }
  if (!RangeInside(region.size(), request.offset, request.length)) {
    return absl::OutOfRangeError(absl::StrCat(
        "range [", request.offset, ", ", request.offset, "+", request.length,
        ") is outside ", RegionLabel(region), " of ", region.size(),
        " bytes"));
  }
  const bool write = IsWrite(request.type);
  if (!core::Allows(exported.access, write ? core::RemoteAccess::kWrite
                                           : core::RemoteAccess::kRead)) {
    return absl::PermissionDeniedError(absl::StrCat(
        RegionLabel(region), " is exported ",
        write ? "read-only: it accepts no WRITE"
              : "write-only: it accepts no READ"));
  }
  if (!region.memory().cpu_mapped()) {
    return absl::FailedPreconditionError(absl::StrCat(
        RegionLabel(region),
        " is a dma-buf its daemon cannot map for the "
        "CPU (GPU memory): the TCP transport cannot reach it, only RDMA "
        "devices can. Use the verbs transport between these nodes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckedRequest> CheckRequest(const core::RegionTable& regions,
                                            const FrameHeader& request) {
  CheckedRequest checked;
  RDMAD_ASSIGN_OR_RETURN(checked.region,
                         regions.FindExportedById(request.region_id));
  checked.terms = checked.region->export_terms();
  RDMAD_RETURN_IF_ERROR(
      CheckRequestAgainst(*checked.region, checked.terms, request));
  return checked;
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
