// TcpPeerChannel against an in-process TcpDataServer (and against fake
// servers for the failure cases): data integrity over many sizes and
// concurrent operations, remote errors, deadlines, lost connections and
// reconnection, and no late writes into local memory.
#include "daemon/transport/tcp/peer_channel.h"

#include <netinet/tcp.h>
#include <poll.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "daemon/transport/tcp/data_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/tcp_test_util.h"

namespace rdmad::tcp {
namespace {

using ::rdmad::tcp::testing::FillPattern;
using ::rdmad::tcp::testing::Regions;
using ::testing::HasSubstr;

constexpr uint64_t kRegionSize = 72ull << 20;

// Waits for one operation's callback.
class Waiter {
 public:
  transport::OpCallback Callback() {
    return [this](absl::Status s) {
      EXPECT_FALSE(done_.HasBeenNotified()) << "callback ran twice";
      status_ = std::move(s);
      done_.Notify();
    };
  }
  absl::Status Wait(absl::Duration timeout = absl::Seconds(30)) {
    if (!done_.WaitForNotificationWithTimeout(timeout)) {
      return absl::InternalError("callback never ran");
    }
    return status_;
  }
  bool done() const { return done_.HasBeenNotified(); }

 private:
  absl::Notification done_;
  absl::Status status_;
};

class TcpPeerChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    local_ = regions_.Make("local", kRegionSize, core::RemoteAccess::kNone);
    remote_ = regions_.Make("remote", kRegionSize, core::RemoteAccess::kReadWrite);
    ASSERT_TRUE(local_ && remote_);
    StartServer("127.0.0.1:0");
    channel_ = MakeChannel(server_->port());
  }

  void StartServer(const std::string& listen) {
    TcpDataServerOptions options;
    options.listen = listen;
    auto server = TcpDataServer::Start(&regions_.table, options, runtime_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  std::unique_ptr<TcpPeerChannel> MakeChannel(uint16_t port,
                                              int connections = 4) {
    TcpChannelOptions options;
    options.loop = runtime_->Pick();
    options.peer = "test-peer:1";
    options.host = "127.0.0.1";
    options.port = port;
    options.connections = connections;
    options.chunk_bytes = 1 << 20;
    options.connect_timeout = absl::Seconds(2);
    auto channel = TcpPeerChannel::Create(options);
    EXPECT_TRUE(channel.ok()) << channel.status();
    return channel.ok() ? *std::move(channel) : nullptr;
  }

  transport::RemoteOp Op(core::OpType type, uint64_t local_offset,
                         uint64_t remote_offset, uint64_t length,
                         absl::Duration timeout = absl::Seconds(20)) {
    transport::RemoteOp op;
    op.op = type;
    op.local = local_;
    op.local_addr = local_->data() + local_offset;
    op.length = length;
    auto info = std::make_shared<core::RemoteRegionInfo>();
    info->peer = "test-peer:1";
    info->region_id = remote_->id();
    info->name = "remote";
    info->length = remote_->size();
    info->tcp_key = remote_->exported().tcp_key;
    auto key = channel_->KeyFor(*info);
    EXPECT_TRUE(key.ok()) << key.status();
    op.remote = std::move(info);
    if (key.ok()) op.key = *key;
    op.remote_offset = remote_offset;
    op.deadline = absl::Now() + timeout;
    return op;
  }

  void PostOne(transport::RemoteOp op, transport::OpCallback done) {
    op.done = std::move(done);
    channel_->Post(absl::MakeSpan(&op, 1));
  }

  absl::Status Run(transport::RemoteOp op) {
    Waiter w;
    PostOne(std::move(op), w.Callback());
    return w.Wait();
  }

  Regions regions_;
  // Before the server and channel: it outlives them.
  std::unique_ptr<runtime::IoRuntime> runtime_ = testing::StartRuntime();
  std::shared_ptr<core::Region> local_, remote_;
  std::unique_ptr<TcpDataServer> server_;
  std::unique_ptr<TcpPeerChannel> channel_;
};

TEST_F(TcpPeerChannelTest, WriteAndReadBackManySizes) {
  const uint64_t sizes[] = {1, 4095, 64 << 10, (1 << 20) + 7, 5 << 20,
                            (64ull << 20) + 3};
  uint64_t seed = 1;
  for (uint64_t size : sizes) {
    SCOPED_TRACE(size);
    const uint64_t local_off = 3, remote_off = 4093;
    FillPattern(local_->data() + local_off, size, ++seed);
    ASSERT_TRUE(Run(Op(core::OpType::kWrite, local_off, remote_off, size)).ok());
    ASSERT_EQ(std::memcmp(local_->data() + local_off,
                          remote_->data() + remote_off, size),
              0);
    std::memset(local_->data() + local_off, 0, size);
    ASSERT_TRUE(Run(Op(core::OpType::kRead, local_off, remote_off, size)).ok());
    ASSERT_EQ(std::memcmp(local_->data() + local_off,
                          remote_->data() + remote_off, size),
              0);
  }
  const transport::ChannelInfo info = channel_->Describe();
  EXPECT_EQ(info.kind, core::TransportKind::kTcp);
  EXPECT_EQ(info.state, transport::ChannelState::kReady);
  ASSERT_EQ(info.connections.size(), 4u);
  uint64_t completed = 0;
  for (const auto& c : info.connections) completed += c.completed;
  EXPECT_GT(completed, 12u);  // large transfers were split
}

// A peer used for small operations costs one descriptor: the channel
// opens a second connection only when the first has min_split_bytes
// waiting, and large operations still spread over all of them.
TEST_F(TcpPeerChannelTest, SmallOperationsShareOneConnection) {
  constexpr int kOps = 200;
  std::vector<std::unique_ptr<Waiter>> waiters;
  std::vector<transport::RemoteOp> ops;
  for (int i = 0; i < kOps; ++i) {
    ops.push_back(Op(i % 2 ? core::OpType::kRead : core::OpType::kWrite,
                     i * 64, i * 64, 8));
    waiters.push_back(std::make_unique<Waiter>());
    ops.back().done = waiters.back()->Callback();
  }
  channel_->Post(absl::MakeSpan(ops));
  for (auto& w : waiters) ASSERT_TRUE(w->Wait().ok());
  int used = 0;
  for (const auto& c : channel_->Describe().connections) {
    if (c.posted > 0) ++used;
  }
  EXPECT_EQ(used, 1) << "200 operations of 8 bytes opened more connections";

  // 8 MiB in one operation: split over every connection.
  ASSERT_TRUE(Run(Op(core::OpType::kWrite, 0, 0, 8 << 20)).ok());
  used = 0;
  for (const auto& c : channel_->Describe().connections) {
    if (c.posted > 0) ++used;
  }
  EXPECT_EQ(used, 4);
}

TEST_F(TcpPeerChannelTest, ManyConcurrentOperations) {
  constexpr int kOps = 300;
  constexpr uint64_t kSlot = 200 << 10;
  std::mt19937_64 rng(7);
  FillPattern(local_->data(), kOps * kSlot, 99);
  std::vector<std::unique_ptr<Waiter>> waiters;
  std::vector<uint64_t> lengths;
  for (int i = 0; i < kOps; ++i) {
    const uint64_t len = 1 + rng() % kSlot;
    lengths.push_back(len);
    waiters.push_back(std::make_unique<Waiter>());
    PostOne(Op(core::OpType::kWrite, i * kSlot, i * kSlot, len),
            waiters.back()->Callback());
  }
  for (int i = 0; i < kOps; ++i) {
    ASSERT_TRUE(waiters[i]->Wait().ok()) << i;
    ASSERT_EQ(std::memcmp(local_->data() + i * kSlot,
                          remote_->data() + i * kSlot, lengths[i]),
              0)
        << i;
  }
  // Reads from several threads at once.
  std::memset(local_->data(), 0, kOps * kSlot);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kOps; i += 4) {
        Waiter w;
        PostOne(Op(core::OpType::kRead, i * kSlot, i * kSlot, lengths[i]),
                w.Callback());
        if (!w.Wait().ok()) failures++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (int i = 0; i < kOps; ++i) {
    ASSERT_EQ(std::memcmp(local_->data() + i * kSlot,
                          remote_->data() + i * kSlot, lengths[i]),
              0)
        << i;
  }
}

TEST_F(TcpPeerChannelTest, RemoteErrorsNameThePeerAndKeepTheChannel) {
  auto op = Op(core::OpType::kWrite, 0, 0, 3 << 20);
  op.key.key ^= 1;
  absl::Status s = Run(std::move(op));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(s.message(), HasSubstr("peer test-peer:1"));
  EXPECT_THAT(s.message(), HasSubstr("key does not match"));

  s = Run(Op(core::OpType::kRead, 0, kRegionSize - 10, 11));
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;

  op = Op(core::OpType::kRead, 0, 0, 100);
  op.key.base = 424242;
  s = Run(std::move(op));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;

  EXPECT_TRUE(Run(Op(core::OpType::kWrite, 0, 0, 3 << 20)).ok());
  EXPECT_EQ(channel_->Describe().state, transport::ChannelState::kReady);
}

TEST_F(TcpPeerChannelTest, ConnectionRefusedIsUnavailable) {
  // A port nobody listens on: bind one, note it, close it.
  uint16_t port;
  {
    auto fd = Listen(HostPort{"127.0.0.1", 0});
    ASSERT_TRUE(fd.ok());
    port = LocalPortOf(fd->get());
  }
  channel_ = MakeChannel(port);
  const absl::Time start = absl::Now();
  absl::Status s = Run(Op(core::OpType::kWrite, 0, 0, 100));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), HasSubstr("test-peer:1"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_EQ(channel_->Describe().state, transport::ChannelState::kError);
}

TEST_F(TcpPeerChannelTest, SilentServerHitsTheDeadline) {
  // The kernel completes connections to a listener that never accepts, so
  // requests go out and no reply ever comes.
  auto silent = Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(silent.ok());
  channel_ = MakeChannel(LocalPortOf(silent->get()));
  const absl::Time start = absl::Now();
  absl::Status s =
      Run(Op(core::OpType::kRead, 0, 0, 4096, absl::Milliseconds(300)));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_GE(took, absl::Milliseconds(290));
  EXPECT_LT(took, absl::Milliseconds(800));
}

// One timer keeps every deadline: an operation posted later with an
// earlier deadline fails at its own (well before the first one's), and
// none fails before its own.
TEST_F(TcpPeerChannelTest, EachOperationFailsAtItsOwnDeadline) {
  auto silent = Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(silent.ok());
  channel_ = MakeChannel(LocalPortOf(silent->get()));
  struct Ended {
    absl::Notification done;
    absl::Status status;
    absl::Time at;
  };
  Ended ended[3];
  const absl::Duration timeouts[3] = {absl::Milliseconds(1500),
                                      absl::Milliseconds(150),
                                      absl::Milliseconds(400)};
  absl::Time deadlines[3];
  for (int i = 0; i < 3; ++i) {
    transport::RemoteOp op = Op(core::OpType::kRead, 4096 * i, 0, 4096,
                                timeouts[i]);
    deadlines[i] = op.deadline;
    PostOne(std::move(op), [e = &ended[i]](absl::Status s) {
      e->at = absl::Now();
      e->status = std::move(s);
      e->done.Notify();
    });
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(ended[i].done.WaitForNotificationWithTimeout(absl::Seconds(30)))
        << i;
    EXPECT_EQ(ended[i].status.code(), absl::StatusCode::kDeadlineExceeded)
        << i << ": " << ended[i].status;
    EXPECT_GE(ended[i].at, deadlines[i]) << i << " failed before its deadline";
  }
  EXPECT_LT(ended[1].at, deadlines[0])
      << "the earlier deadline waited for the first operation's";
  // The channel goes on keeping deadlines after its timer ran dry.
  Waiter again;
  PostOne(Op(core::OpType::kRead, 0, 0, 4096, absl::Milliseconds(100)),
          again.Callback());
  EXPECT_EQ(again.Wait().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(TcpPeerChannelTest, ServerRestartFailsInFlightThenReconnects) {
  ASSERT_TRUE(Run(Op(core::OpType::kWrite, 0, 0, 1 << 20)).ok());
  const uint16_t port = server_->port();
  server_->Stop();
  server_.reset();
  // The old connections are gone: the next transfer fails UNAVAILABLE
  // (either on the dead connection or on the refused reconnect).
  absl::Status s = Run(Op(core::OpType::kWrite, 0, 0, 1 << 20));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  // Back on the same port: the channel reconnects on next use.
  StartServer(absl::StrCat("127.0.0.1:", port));
  s = Run(Op(core::OpType::kWrite, 0, 0, 1 << 20));
  if (!s.ok()) {
    // A connection that died silently may fail one more request.
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    s = Run(Op(core::OpType::kWrite, 0, 0, 1 << 20));
  }
  EXPECT_TRUE(s.ok()) << s;
  bool reconnected = false;
  for (const auto& c : channel_->Describe().connections) {
    reconnected |= c.generation >= 2;
  }
  EXPECT_TRUE(reconnected);
}

// A server that answers one READ late (after the client's deadline) with
// bytes that must not land in local memory, then answers a second READ on
// time to show the connection is still in step.
TEST_F(TcpPeerChannelTest, LateReadDataIsDropped) {
  auto listener = Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok());
  const uint16_t port = LocalPortOf(listener->get());
  std::thread fake([fd = listener->get()] {
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10000), 1);
    UniqueFd conn(::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(conn.valid());
    for (int i = 0; i < 2; ++i) {
      std::string head(kRequestHeaderSize, '\0');
      size_t at = 0;
      while (at < head.size()) {
        ssize_t n = ::recv(conn.get(), head.data() + at, head.size() - at, 0);
        ASSERT_GT(n, 0);
        at += n;
      }
      auto h = DecodeHeader(absl::Span<const uint8_t>(
          reinterpret_cast<const uint8_t*>(head.data()), head.size()));
      ASSERT_TRUE(h.ok() && h->has_value());
      if (i == 0) absl::SleepFor(absl::Milliseconds(400));
      const std::string reply = EncodeReplyFrame(
          FrameType::kReadReply, (*h)->request_id, absl::OkStatus(),
          std::string((*h)->length, i == 0 ? 'L' : 'G'));
      ASSERT_EQ(::send(conn.get(), reply.data(), reply.size(), MSG_NOSIGNAL),
                static_cast<ssize_t>(reply.size()));
    }
    absl::SleepFor(absl::Milliseconds(200));
  });
  channel_ = MakeChannel(port, /*connections=*/1);
  std::memset(local_->data(), 'o', 1 << 20);
  absl::Status s =
      Run(Op(core::OpType::kRead, 0, 0, 1 << 20, absl::Milliseconds(150)));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  // The late bytes arrive now; they must be dropped.
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(std::string(local_->data(), 16), std::string(16, 'o'));
  EXPECT_EQ(local_->data()[(1 << 20) - 1], 'o');
  // The second READ still works on the same connection.
  s = Run(Op(core::OpType::kRead, 0, 0, 4096));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(std::string(local_->data(), 8), std::string(8, 'G'));
  fake.join();
}

// The channel reads as many replies as the socket holds at once, and a
// READ's payload larger than its receive buffer straight to its place:
// however a server's replies are cut on the way (all in one send, one byte
// at a time, pieces that end anywhere), each operation gets its own
// status and bytes.
class TcpPeerChannelCutTest : public TcpPeerChannelTest,
                              public ::testing::WithParamInterface<size_t> {};

TEST_P(TcpPeerChannelCutTest, RepliesAreTakenApartHoweverTheyAreCut) {
  const size_t cut = GetParam();  // 0: all in one send
  struct Planned {
    core::OpType type;
    uint64_t length;
    bool fail;
  };
  const std::vector<Planned> plan = {
      {core::OpType::kWrite, 8, false},      {core::OpType::kRead, 8, false},
      {core::OpType::kWrite, 100, true},     {core::OpType::kRead, 20000, false},
      {core::OpType::kRead, 40000, true},    {core::OpType::kRead, 40000, false},
      {core::OpType::kWrite, 16, false},     {core::OpType::kRead, 5, false}};
  auto listener = Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok());
  const uint16_t port = LocalPortOf(listener->get());
  // Reads every request, then answers them all: READ payloads by the
  // request's position in the plan, failures with a message.
  std::thread fake([&, fd = listener->get()] {
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10000), 1);
    UniqueFd conn(::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(conn.valid());
    const auto read_exactly = [&](size_t n) {
      std::string out(n, '\0');
      size_t at = 0;
      while (at < n) {
        const ssize_t r = ::recv(conn.get(), out.data() + at, n - at, 0);
        if (r <= 0) return std::string();
        at += static_cast<size_t>(r);
      }
      return out;
    };
    std::string replies;
    for (size_t i = 0; i < plan.size(); ++i) {
      const std::string head = read_exactly(kRequestHeaderSize);
      ASSERT_EQ(head.size(), kRequestHeaderSize);
      auto h = DecodeHeader(absl::Span<const uint8_t>(
          reinterpret_cast<const uint8_t*>(head.data()), head.size()));
      ASSERT_TRUE(h.ok() && h->has_value());
      ASSERT_EQ((*h)->length, plan[i].length);
      if (IsWrite((*h)->type)) read_exactly((*h)->length);
      const FrameType type = IsWrite((*h)->type) ? FrameType::kWriteReply
                                                 : FrameType::kReadReply;
      if (plan[i].fail) {
        replies += EncodeReplyFrame(
            type, (*h)->request_id,
            absl::PermissionDeniedError(absl::StrCat("no ", i)), "");
      } else {
        std::string payload;
        if (type == FrameType::kReadReply) {
          payload.resize((*h)->length);
          FillPattern(payload.data(), payload.size(), 500 + i);
        }
        replies += EncodeReplyFrame(type, (*h)->request_id, absl::OkStatus(),
                                    payload);
      }
    }
    const int one = 1;
    ::setsockopt(conn.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const size_t step = cut == 0 ? replies.size() : cut;
    for (size_t at = 0; at < replies.size(); at += step) {
      const size_t n = std::min(step, replies.size() - at);
      ASSERT_EQ(::send(conn.get(), replies.data() + at, n, MSG_NOSIGNAL),
                static_cast<ssize_t>(n));
    }
    // Until the channel has taken it all.
    char c;
    ::recv(conn.get(), &c, 1, 0);
  });
  channel_ = MakeChannel(port, /*connections=*/1);
  std::memset(local_->data(), 'o', 1 << 20);
  std::vector<std::unique_ptr<Waiter>> waiters;
  std::vector<transport::RemoteOp> ops;
  uint64_t at = 0;
  std::vector<uint64_t> offsets;
  for (const Planned& p : plan) {
    offsets.push_back(at);
    ops.push_back(Op(p.type, at, at, p.length));
    waiters.push_back(std::make_unique<Waiter>());
    ops.back().done = waiters.back()->Callback();
    at += p.length + 64;
  }
  channel_->Post(absl::MakeSpan(ops));  // one batch: pipelined requests
  for (size_t i = 0; i < plan.size(); ++i) {
    const absl::Status s = waiters[i]->Wait();
    if (plan[i].fail) {
      EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << i << ": " << s;
      EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("no ", i)));
      if (plan[i].type == core::OpType::kRead) {
        EXPECT_EQ(local_->data()[offsets[i]], 'o') << "a failed READ wrote";
      }
      continue;
    }
    EXPECT_TRUE(s.ok()) << i << ": " << s;
    if (plan[i].type == core::OpType::kRead) {
      std::string expect(plan[i].length, '\0');
      FillPattern(expect.data(), expect.size(), 500 + i);
      EXPECT_EQ(std::memcmp(local_->data() + offsets[i], expect.data(),
                            expect.size()),
                0)
          << "READ " << i;
      EXPECT_EQ(local_->data()[offsets[i] + plan[i].length], 'o')
          << "READ " << i << " wrote past its end";
    }
  }
  channel_.reset();  // closes the connection: the fake server returns
  fake.join();
}

INSTANTIATE_TEST_SUITE_P(Cuts, TcpPeerChannelCutTest,
                         ::testing::Values(0, 1, 5, 33, 4096, 16385));

TEST_F(TcpPeerChannelTest, AnOperationWithoutItsLocalRegionIsRefused) {
  transport::RemoteOp op = Op(core::OpType::kRead, 0, 0, 4096);
  op.local = nullptr;
  absl::Status status = Run(std::move(op));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  // The channel is unharmed.
  EXPECT_TRUE(Run(Op(core::OpType::kRead, 0, 0, 4096)).ok());
}

TEST_F(TcpPeerChannelTest, CloseFailsPendingAndLaterPosts) {
  auto silent = Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(silent.ok());
  channel_ = MakeChannel(LocalPortOf(silent->get()));
  Waiter pending;
  PostOne(Op(core::OpType::kRead, 0, 0, 4096), pending.Callback());
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(pending.done());
  channel_->Close();
  EXPECT_EQ(pending.Wait(absl::Seconds(1)).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Run(Op(core::OpType::kRead, 0, 0, 4096)).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(channel_->Describe().state, transport::ChannelState::kClosed);
}

TEST_F(TcpPeerChannelTest, FreedLocalRegionStaysMappedUntilDone) {
  auto doomed = regions_.Make("doomed-local", 8 << 20, core::RemoteAccess::kNone);
  ASSERT_NE(doomed, nullptr);
  std::weak_ptr<core::Region> weak = doomed;
  auto op = Op(core::OpType::kRead, 0, 0, 8 << 20);
  op.local = doomed;
  op.local_addr = doomed->data();
  ASSERT_TRUE(regions_.table.Free(regions_.root, {doomed->id(), ""}).ok());
  doomed.reset();
  EXPECT_FALSE(weak.expired());  // the op holds it
  EXPECT_TRUE(Run(std::move(op)).ok());
  for (int i = 0; i < 100 && !weak.expired(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace rdmad::tcp
