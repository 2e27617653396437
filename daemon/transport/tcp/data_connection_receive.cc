// DataConnection's receiving side: reads what the socket holds into the
// connection's receive buffer, takes the request frames apart, moves a
// WRITE's payload into its region (or drains it) and checks each request.
// The rest of the connection (its life, the stall check, the replies) is
// in data_connection.cc.
#include <sys/epoll.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/core/region_copy.h"
#include "daemon/transport/tcp/data_connection.h"
#include "daemon/transport/tcp/data_server.h"
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

}  // namespace

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

absl::StatusOr<std::shared_ptr<core::Region>> DataConnection::CheckExport(
    const FrameHeader& h) {
  if (checked_.has_value() && checked_->terms.tcp_key == h.key) {
    std::shared_ptr<core::Region> region = checked_->region.lock();
    if (region != nullptr && region->id() == h.region_id &&
        region->export_epoch() == checked_->terms.epoch) {
      RDMAD_RETURN_IF_ERROR(CheckRequestAgainst(*region, checked_->terms, h));
      return region;
    }
  }
  checked_.reset();
  // The epoch is read with the terms, before the admission: a change of
  // either after that makes the next request look again.
  RDMAD_ASSIGN_OR_RETURN(CheckedRequest checked,
                         CheckRequest(*ctx_->regions, h));
  if (!checked.region->AdmitsDataPeer(peer_)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the export of ", RegionLabel(*checked.region),
        " does not admit data connections from ", remote_,
        ": ask its owner to add this daemon to its access list (rdmactl "
        "export --allow)"));
  }
  checked_ = CheckedExport{.region = checked.region, .terms = checked.terms};
  return std::move(checked.region);
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
  absl::StatusOr<std::shared_ptr<core::Region>> region = CheckExport(h);
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

}  // namespace rdmad::tcp
