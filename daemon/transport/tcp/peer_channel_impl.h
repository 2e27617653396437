// Internals of TcpPeerChannel (peer_channel.h), shared by its two source
// files: peer_channel.cc (operations: chunking, balancing, deadlines,
// closing) and peer_channel_io.cc (one connection's socket: connect, send,
// receive and decode replies). Not a public header.
//
// Threads: everything runs on the channel's event loop except the members
// marked "any thread", which only touch the mutex-guarded part and atomics.
#ifndef RDMAD_DAEMON_TRANSPORT_TCP_PEER_CHANNEL_IMPL_H_
#define RDMAD_DAEMON_TRANSPORT_TCP_PEER_CHANNEL_IMPL_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "daemon/runtime/earliest_deadline.h"
#include "daemon/runtime/event_loop.h"
#include "daemon/transport/tcp/peer_channel.h"
#include "daemon/transport/tcp/receive_buffer.h"
#include "daemon/transport/tcp/socket_util.h"
#include "daemon/transport/tcp/wire.h"
#include "daemon/transport/op_inbox.h"
#include "daemon/transport/transport.h"

namespace rdmad::tcp {

class TcpPeerChannel::Impl : public transport::OpInbox::Channel,
                             public std::enable_shared_from_this<Impl> {
 public:
  explicit Impl(TcpChannelOptions options);
  ~Impl() override;

  // Any thread.
  void Post(absl::Span<transport::RemoteOp> ops);
  transport::ChannelInfo Describe() const;
  void Close();

 private:
  enum class In { kHeader, kMessage, kPayload };

  // One posted operation, split into chunks.
  struct Op {
    uint64_t id = 0;
    transport::RemoteOp op;
    uint32_t chunks_total = 0;
    uint32_t chunks_done = 0;
    uint32_t outstanding = 0;  // chunks still held by connections
    bool finished = false;     // `op.done` has run
  };

  // One request frame of an operation.
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
    transport::ConnectionState state = transport::ConnectionState::kIdle;
    uint64_t watch = 0;          // loop watch id while the socket is open
    uint64_t connect_timer = 0;  // while connecting
    UniqueFd fd;
    bool want_write = false;
    // Every chunk assigned to this connection, by request id.
    absl::flat_hash_map<uint64_t, std::unique_ptr<Chunk>> chunks;
    std::deque<Chunk*> send_queue;  // not yet completely sent
    uint64_t pending_bytes = 0;     // of the chunks above, for balancing
    // Receiving.
    In in = In::kHeader;
    ReceiveBuffer received_bytes;
    FrameHeader reply;
    std::string message;
    size_t message_have = 0;
    Chunk* receiving = nullptr;
    uint64_t received = 0;
    // For Describe (any thread).
    std::atomic<transport::ConnectionState> public_state{
        transport::ConnectionState::kIdle};
    std::atomic<uint64_t> posted{0}, post_calls{0}, completed{0}, errors{0},
        generation{0};
    std::atomic<uint32_t> outstanding{0};
  };

  struct ConnAddresses {
    std::string local, remote;
  };

  // --- peer_channel.cc: operations ---
  // Fails them when torn down.
  void StartOps(absl::Span<transport::RemoteOp> ops) override;
  void StartOp(transport::RemoteOp in);
  Conn& LeastLoaded();
  void Expire(uint64_t op_id);
  void FinishOp(Op& op, absl::Status status);
  // Forgets an operation once it is finished and no connection holds one
  // of its chunks.
  void MaybeForget(Op& op);
  // A chunk's reply has been fully received (or it was dropped unsent).
  void CompleteChunk(Conn& conn, Chunk* chunk, const absl::Status& status);
  // Operations and chunks come from, and go back to, lists of spares: no
  // heap allocation per operation once the channel is warm.
  std::unique_ptr<Op> NewOp();
  std::unique_ptr<Chunk> NewChunk();
  void Recycle(std::unique_ptr<Op> op);
  void Recycle(std::unique_ptr<Chunk> chunk);
  void Teardown();
  absl::Status ClosedError() const override;

  // --- peer_channel_io.cc: one connection's socket ---
  void StartConnecting(Conn& conn);
  void OnSocketEvent(Conn& conn, uint32_t events);
  void OnConnected(Conn& conn);
  // Closes the connection and fails every request on it with UNAVAILABLE
  // (or `status`). The connection is re-opened on next use.
  void FailConn(Conn& conn, const std::string& why,
                absl::Status status = absl::OkStatus());
  // Returns false if the connection failed.
  bool OnReadable(Conn& conn);
  // Takes apart what the receive buffer holds: reply headers, messages and
  // the payload bytes that came with them. False if the connection failed
  // (or was replaced by a new one) meanwhile.
  bool TakeReceived(Conn& conn);
  // Whether `conn` is still the connection of `generation`, ready.
  static bool StillUp(const Conn& conn, uint64_t generation) {
    return conn.state == transport::ConnectionState::kReady &&
           conn.generation.load(std::memory_order_relaxed) == generation;
  }
  // The payload of the chunk being received is all in place (or dropped).
  void PayloadDone(Conn& conn);
  bool OnReplyHeader(Conn& conn, const FrameHeader& h);
  // The reply header and its message (if any) are in; payload may follow.
  bool OnMessageDone(Conn& conn);
  bool ProtocolError(Conn& conn, absl::string_view what);
  // Sends queued requests until the queue is empty or the socket is full.
  void Flush(Conn& conn);
  // The deadline timer fired: fails what is due and re-arms it for the
  // earliest deadline left.
  void ExpireDue();

  TcpChannelOptions options_;
  runtime::EventLoop* const loop_;  // Not owned.

  // Loop thread only.
  std::vector<std::unique_ptr<Conn>> conns_;
  std::optional<SocketAddress> address_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Op>> ops_;
  // At most kMaxSpare of each: what a burst of small operations left.
  static constexpr size_t kMaxSpare = 256;
  std::vector<std::unique_ptr<Op>> spare_ops_;
  std::vector<std::unique_ptr<Chunk>> spare_chunks_;
  uint64_t next_op_id_ = 1;
  uint64_t next_request_id_ = 1;
  // Every operation's deadline, as one timer (ExpireDue).
  runtime::EarliestDeadline deadlines_;
  size_t rotate_ = 0;
  std::vector<char> discard_;
  bool torn_down_ = false;

  transport::OpInbox inbox_;
  mutable absl::Mutex mu_;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  std::vector<ConnAddresses> infos_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::tcp

#endif  // RDMAD_DAEMON_TRANSPORT_TCP_PEER_CHANNEL_IMPL_H_
