// DataConnection: one connection a peer opened to this daemon's TCP data
// listener (data_server.h), served on one event loop of the IoRuntime.
//
// It reads request frames, as many per read as the socket holds, into a
// receive buffer (receive_buffer.h), checks each against the region table
// exactly as a NIC checks an rkey (CheckRequest), copies a WRITE's payload
// that came in the buffer to the region and reads the rest of a larger one
// straight into it, sends a READ's straight from the region into the
// socket, and answers every request with one reply. A rejected
// WRITE's payload is read and dropped so the connection stays usable;
// anything that is not a valid frame closes it.
//
// A WRITE_IMM's notification names its writer (core::NotificationWriter):
// the Peer address the connecting daemon gave in its IDENTIFY frame, or,
// without one, the address the connection comes from.
//
// Bytes move only under a use of the export the request was checked
// against (core::ExportUse), one readv or sendmsg at a time: an unexport,
// re-export or free waits for the one in progress, and after it no more
// bytes of that request land in or leave the region.
#ifndef RDMAD_DAEMON_TRANSPORT_TCP_DATA_CONNECTION_H_
#define RDMAD_DAEMON_TRANSPORT_TCP_DATA_CONNECTION_H_

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/unique_fd.h"
#include "daemon/core/region.h"
#include "daemon/core/region_table.h"
#include "daemon/runtime/event_loop.h"
#include "daemon/transport/tcp/receive_buffer.h"
#include "daemon/transport/tcp/wire.h"

namespace rdmad::tcp {

struct TcpDataServerOptions;

// A request that passed CheckRequest: the region to do the I/O on, and the
// export terms it was checked against.
struct CheckedRequest {
  std::shared_ptr<core::Region> region;
  core::ExportTerms terms;
};

// Checks one request against the region table as the server does:
//   - the region exists and is exported            else NOT_FOUND
//   - the key equals the region's current TCP key  else PERMISSION_DENIED
//   - [offset, offset+length) lies inside it       else OUT_OF_RANGE
//   - the export grants the access (w / r)         else PERMISSION_DENIED
// (The server then asks whether the export admits the peer.)
absl::StatusOr<CheckedRequest> CheckRequest(const core::RegionTable& regions,
                                            const FrameHeader& request);

// The checks of CheckRequest after the lookup: `request` against `region`'s
// export `exported` (as Region::export_terms read it).
absl::Status CheckRequestAgainst(const core::Region& region,
                                 const core::ExportTerms& exported,
                                 const FrameHeader& request);

// How the server's messages name a region: "region 'NAME'" or "region #ID".
std::string RegionLabel(const core::Region& region);

// Counters shared by every connection of a server.
struct DataServerCounters {
  std::atomic<uint64_t> connections_accepted{0};
  std::atomic<uint64_t> connections_open{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> bytes_written{0};
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> protocol_errors{0};
  std::atomic<uint64_t> refused{0};
  // Connections closed for a reason worth a log line (garbage, a frame cut
  // off, a socket error); only the first and every 1000th are logged.
  std::atomic<uint64_t> closed_on_error{0};
  // Closed by the stall check (TcpDataServerOptions::stall_timeout).
  std::atomic<uint64_t> stalled{0};
};

// What the connections of one server share. Not owned by them; outlives
// them.
struct DataServerContext {
  const core::RegionTable* regions = nullptr;
  const TcpDataServerOptions* options = nullptr;
  DataServerCounters* counters = nullptr;
};

// Lives on its loop: every member runs there.
class DataConnection {
 public:
  // `closed` runs on the loop, once, after the connection closed; the owner
  // destroys the connection then (not before: it may still be on the
  // stack).
  DataConnection(UniqueFd fd, runtime::EventLoop* loop,
                 const DataServerContext* context,
                 absl::AnyInvocable<void(DataConnection*)> closed);
  ~DataConnection();

  DataConnection(const DataConnection&) = delete;
  DataConnection& operator=(const DataConnection&) = delete;

  absl::Status Start();
  // Stops serving, releases the regions it held, closes the socket and
  // schedules `closed`. Idempotent.
  void Close(absl::string_view why);

 private:
  // One queued reply: header, error message, and for READ the region bytes
  // to send straight from the mapping.
  struct Reply {
    std::array<uint8_t, kReplyHeaderSize> header{};
    std::string message;
    std::shared_ptr<core::Region> region;  // holds the memory while sending
    uint64_t request_id = 0;
    uint64_t key = 0;  // READ: the export the payload is read under
    const char* payload = nullptr;
    uint64_t payload_length = 0;
    uint64_t sent = 0;  // bytes of the whole reply already sent
    uint64_t total() const {
      return kReplyHeaderSize + message.size() + payload_length;
    }
    // The heap it holds while queued (the payload is the region's).
    uint64_t memory() const { return sizeof(Reply) + message.capacity(); }
  };

  enum class In { kHeader, kPayload, kDrain, kIdentity };

  void OnEvent(uint32_t events);
  // Takes what is buffered, reads as much as is there (up to a budget),
  // many frames per read, and sends the replies. False if it closed.
  bool OnReadable();
  // Reads the socket while reading is not paused. False if it closed.
  bool ReadSocket();
  // Whether the buffer holds requests to take now that reading resumed.
  bool BufferedWork() const;
  // Takes apart what the receive buffer holds: request headers, and the
  // payload, drained bytes or address that came with them. Stops while
  // reading is paused. False if it closed.
  bool TakeReceived();
  // Begins the use of the export the WRITE in progress writes under; when
  // it was revoked, turns the rest of the WRITE into bytes to drain
  // (answered with why) and returns false.
  bool BeginWriteUse(std::optional<core::ExportUse>& use);
  // Checks a READ or WRITE request (CheckRequest, then whether the export
  // admits this peer), through checked_ when it still applies.
  absl::StatusOr<std::shared_ptr<core::Region>> CheckExport(
      const FrameHeader& h);
  // False if it closed the connection.
  bool FinishBody();
  // An IDENTIFY frame's header arrived: reads its address next. False if
  // it closed the connection (not the first frame).
  bool StartIdentity(const FrameHeader& h);
  bool CheckPartialHeader();
  // A request header is in (or could not be decoded). False if it closed.
  bool OnHeader(const absl::StatusOr<std::optional<FrameHeader>>& decoded);
  void QueueReply(FrameType type, uint64_t request_id,
                  const absl::Status& status);
  // Stops reading requests while the replies queued exceed the server's
  // bounds (TcpDataServerOptions::max_queued_reply_*), so that a peer that
  // reads no replies cannot make the daemon queue without bound; Flush
  // reads again once they are half drained.
  void PauseReadingIfBacklogged();
  void PopReply();
  // Turns a READ reply whose export was revoked before its payload went
  // out into an error reply. False if the connection had to be closed
  // instead (part of the reply, whose header says OK, is on the wire).
  bool RevokedReply(Reply& reply, const absl::Status& why);
  void Flush();
  void UpdateInterest();
  // Bytes moved one way or the other: the stall clock starts again.
  void Progressed() { last_progress_ = loop_->turn_start(); }
  // Whether the connection waits on its peer for something: a first
  // request, the rest of one, or the reading of its replies.
  bool UnderWay() const {
    return !got_request_ || !received_.empty() || in_ != In::kHeader ||
           !out_.empty();
  }
  // The stall check (TcpDataServerOptions::stall_timeout): closes a
  // connection under way that moved nothing for the timeout, else looks
  // again when it next could have.
  void ArmStallCheck(absl::Time when);
  void CheckStall();

  runtime::EventLoop* const loop_;      // Not owned.
  const DataServerContext* const ctx_;  // Not owned.
  absl::AnyInvocable<void(DataConnection*)> closed_callback_;
  UniqueFd fd_;
  uint64_t watch_ = 0;
  bool closed_ = false;
  std::string remote_;
  sockaddr_storage peer_{};  // for exports' access lists
  // Receiving.
  In in_ = In::kHeader;
  ReceiveBuffer received_;
  uint64_t request_id_ = 0;
  std::shared_ptr<core::Region> region_;  // WRITE in progress
  // The export the last request passed its checks against (lookup, terms,
  // admission of this peer). A request for the same region id and key is
  // checked against these terms while the region's export epoch is
  // unchanged: the table and region locks are taken once per run of
  // requests, not per request. The bytes still move only under an
  // ExportUse, which checks the export again under the region's lock.
  // Weak: an idle connection must not keep a freed region's memory.
  struct CheckedExport {
    std::weak_ptr<core::Region> region;
    core::ExportTerms terms;
  };
  std::optional<CheckedExport> checked_;
  uint64_t key_ = 0;                      // the export it writes under
  char* dest_ = nullptr;
  uint64_t left_ = 0;        // payload bytes still to receive (or drain)
  uint64_t write_len_ = 0;   // the WRITE's length, for the counters
  uint64_t write_offset_ = 0;
  std::optional<uint32_t> write_immediate_;  // a WRITE_IMM's
  absl::Status drain_status_;  // why the WRITE being drained was rejected
  // Who writes on this connection, for notifications: the source address
  // until an IDENTIFY says better (shared by the notifications it makes).
  std::shared_ptr<const std::string> writer_;
  std::string identity_;  // an IDENTIFY's address, as it arrives
  // Sending.
  std::deque<Reply> out_;
  uint64_t queued_payload_ = 0;  // READ bytes of the replies in out_
  uint64_t queued_memory_ = 0;   // Reply::memory() of those in out_
  bool want_write_ = false;          // EPOLLOUT registered
  bool reading_ = true;              // wants EPOLLIN
  bool reading_registered_ = true;   // EPOLLIN registered
  // Stall check.
  bool got_request_ = false;  // a whole request header arrived
  absl::Time last_progress_;
  uint64_t stall_timer_ = 0;  // 0: none armed
};

}  // namespace rdmad::tcp

#endif  // RDMAD_DAEMON_TRANSPORT_TCP_DATA_CONNECTION_H_
