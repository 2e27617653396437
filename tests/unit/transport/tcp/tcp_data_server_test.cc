// TcpDataServer: the checks a NIC would make (export, key, bounds, access),
// each failing with its status without touching memory and without
// breaking the connection; garbage closing the connection; regions held
// across a concurrent free; a WRITE_IMM's notification naming its writer.
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/transport/tcp/data_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/tcp_test_util.h"

namespace rdmad::tcp {
namespace {

using ::rdmad::tcp::testing::FillPattern;
using ::rdmad::tcp::testing::RawConnection;
using ::rdmad::tcp::testing::Regions;
using ::testing::HasSubstr;

constexpr uint64_t kSize = 64 << 10;

// What the server announced (from its loops).
class RecordingSink final : public core::NotificationSink {
 public:
  struct Seen {
    uint64_t region, offset, length;
    uint32_t immediate;
    core::TransportKind transport;
    std::string writer;  // "(none)" for a null address
    std::optional<uint32_t> writer_uid;
  };
  void Notify(const core::Region& region, uint64_t offset, uint64_t length,
              uint32_t immediate,
              const core::NotificationWriter& writer) override {
    absl::MutexLock lock(&mu_);
    seen_.push_back({region.id(), offset, length, immediate, writer.transport,
                     writer.address != nullptr ? *writer.address : "(none)",
                     writer.uid});
  }
  std::vector<Seen> seen() const {
    absl::MutexLock lock(&mu_);
    return seen_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Seen> seen_ ABSL_GUARDED_BY(mu_);
};

class TcpDataServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rw_ = regions_.Make("rw", kSize, core::RemoteAccess::kReadWrite);
    ro_ = regions_.Make("ro", kSize, core::RemoteAccess::kRead);
    wo_ = regions_.Make("wo", kSize, core::RemoteAccess::kWrite);
    local_ = regions_.Make("local", kSize, core::RemoteAccess::kNone);
    ASSERT_TRUE(rw_ && ro_ && wo_ && local_);
    for (auto* r : {&rw_, &ro_, &wo_, &local_}) {
      FillPattern((*r)->data(), kSize, (*r)->id());
    }
    TcpDataServerOptions options;
    options.listen = "127.0.0.1:0";
    options.notifications = &sink_;
    auto server = TcpDataServer::Start(&regions_.table, options, runtime_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto conn = RawConnection::Connect(server_->port());
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_.emplace(*std::move(conn));
  }

  static uint64_t Key(const std::shared_ptr<core::Region>& r) {
    return r->exported().tcp_key;
  }

  // True if every region still holds its original pattern.
  bool Untouched() {
    std::string expect(kSize, '\0');
    for (auto* r : {&rw_, &ro_, &wo_, &local_}) {
      FillPattern(expect.data(), kSize, (*r)->id());
      if (std::memcmp(expect.data(), (*r)->data(), kSize) != 0) return false;
    }
    return true;
  }

  // A WRITE and a READ that must work on the same connection afterwards.
  void ExpectConnectionWorks() {
    const std::string data = "still works";
    ASSERT_TRUE(conn_->Send(EncodeRequestFrame(FrameType::kWrite, 900,
                                               rw_->id(), Key(rw_), 100,
                                               data.size(), data))
                    .ok());
    auto reply = conn_->ReadReply();
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->header.request_id, 900u);
    EXPECT_TRUE(reply->status().ok()) << reply->status();
    ASSERT_TRUE(conn_->Send(EncodeRequestFrame(FrameType::kRead, 901,
                                               rw_->id(), Key(rw_), 100,
                                               data.size()))
                    .ok());
    reply = conn_->ReadReply();
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->header.request_id, 901u);
    EXPECT_EQ(reply->payload, data);
    // Put the pattern back for Untouched().
    FillPattern(rw_->data(), kSize, rw_->id());
  }

  Regions regions_;
  RecordingSink sink_;
  // Before the server: it outlives it.
  std::unique_ptr<runtime::IoRuntime> runtime_ = testing::StartRuntime();
  std::shared_ptr<core::Region> rw_, ro_, wo_, local_;
  std::unique_ptr<TcpDataServer> server_;
  std::optional<RawConnection> conn_;
};

TEST_F(TcpDataServerTest, WriteThenReadBack) {
  std::string data(5000, '\0');
  FillPattern(data.data(), data.size(), 42);
  ASSERT_TRUE(conn_->Send(EncodeRequestFrame(FrameType::kWrite, 1, rw_->id(),
                                             Key(rw_), 7, data.size(), data))
                  .ok());
  auto reply = conn_->ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->header.type, FrameType::kWriteReply);
  EXPECT_EQ(reply->header.request_id, 1u);
  EXPECT_TRUE(reply->status().ok()) << reply->status();
  EXPECT_EQ(std::memcmp(rw_->data() + 7, data.data(), data.size()), 0);

  ASSERT_TRUE(conn_->Send(EncodeRequestFrame(FrameType::kRead, 2, rw_->id(),
                                             Key(rw_), 7, data.size()))
                  .ok());
  reply = conn_->ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->header.type, FrameType::kReadReply);
  EXPECT_EQ(reply->payload, data);
  EXPECT_EQ(server_->stats().bytes_written, data.size());
  EXPECT_EQ(server_->stats().bytes_read, data.size());
}

TEST_F(TcpDataServerTest, PipelinedRequestsAllAnswered) {
  // Many requests written back to back before reading any reply.
  std::string batch;
  for (uint64_t i = 0; i < 200; ++i) {
    const std::string data(100, static_cast<char>('a' + i % 26));
    batch += EncodeRequestFrame(FrameType::kWrite, 2 * i, rw_->id(), Key(rw_),
                                i * 100, data.size(), data);
    batch += EncodeRequestFrame(FrameType::kRead, 2 * i + 1, rw_->id(),
                                Key(rw_), i * 100, data.size());
  }
  ASSERT_TRUE(conn_->Send(batch).ok());
  for (int i = 0; i < 400; ++i) {
    auto reply = conn_->ReadReply();
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_TRUE(reply->status().ok()) << reply->status();
    if (reply->header.type == FrameType::kReadReply) {
      const uint64_t n = reply->header.request_id / 2;
      EXPECT_EQ(reply->payload, std::string(100, static_cast<char>('a' + n % 26)));
    }
  }
}

struct Violation {
  std::string name;
  FrameType type;
  int region;  // 0 rw, 1 ro, 2 wo, 3 local (unexported), 4 no such region
  bool good_key;
  uint64_t offset;
  uint64_t length;
  absl::StatusCode code;
  std::string message;
};

TEST_F(TcpDataServerTest, ViolationsFailWithoutTouchingMemory) {
  const uint64_t kMax = std::numeric_limits<uint64_t>::max();
  const std::vector<Violation> cases = {
      {"unexported write", FrameType::kWrite, 3, true, 0, 16,
       absl::StatusCode::kNotFound, "not exported"},
      {"unexported read", FrameType::kRead, 3, true, 0, 16,
       absl::StatusCode::kNotFound, "not exported"},
      {"no such region", FrameType::kWrite, 4, true, 0, 16,
       absl::StatusCode::kNotFound, "not exported"},
      {"wrong key write", FrameType::kWrite, 0, false, 0, 16,
       absl::StatusCode::kPermissionDenied, "key does not match"},
      {"wrong key read", FrameType::kRead, 0, false, 0, 16,
       absl::StatusCode::kPermissionDenied, "key does not match"},
      {"past the end", FrameType::kWrite, 0, true, kSize, 1,
       absl::StatusCode::kOutOfRange, "outside"},
      {"straddles the end", FrameType::kWrite, 0, true, kSize - 10, 11,
       absl::StatusCode::kOutOfRange, "outside"},
      {"longer than region", FrameType::kRead, 0, true, 0, kSize + 1,
       absl::StatusCode::kOutOfRange, "outside"},
      {"offset+length overflows", FrameType::kWrite, 0, true, kMax - 7, 16,
       absl::StatusCode::kOutOfRange, "outside"},
      {"huge offset read", FrameType::kRead, 0, true, kMax, 1,
       absl::StatusCode::kOutOfRange, "outside"},
      {"write to read-only", FrameType::kWrite, 1, true, 0, 4096,
       absl::StatusCode::kPermissionDenied, "read-only"},
      {"read from write-only", FrameType::kRead, 2, true, 0, 4096,
       absl::StatusCode::kPermissionDenied, "write-only"},
  };
  const std::shared_ptr<core::Region> by_index[] = {rw_, ro_, wo_, local_};
  uint64_t id = 100;
  for (const Violation& c : cases) {
    SCOPED_TRACE(c.name);
    const uint64_t region_id = c.region == 4 ? 999999 : by_index[c.region]->id();
    uint64_t key = c.region == 4 ? 1 : Key(by_index[c.region]);
    if (!c.good_key) key ^= 0x5a5a;
    const bool write = c.type == FrameType::kWrite;
    // Rejected WRITEs still carry their payload; it must be drained.
    const std::string payload = write ? std::string(c.length, 'Z') : "";
    ASSERT_TRUE(conn_->Send(EncodeRequestFrame(c.type, ++id, region_id, key,
                                               c.offset, c.length, payload))
                    .ok());
    auto reply = conn_->ReadReply();
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->header.request_id, id);
    EXPECT_EQ(reply->header.type,
              write ? FrameType::kWriteReply : FrameType::kReadReply);
    EXPECT_EQ(reply->status().code(), c.code) << reply->status();
    EXPECT_THAT(reply->message, HasSubstr(c.message));
    EXPECT_TRUE(reply->payload.empty());
    EXPECT_TRUE(Untouched());
    ExpectConnectionWorks();
  }
  EXPECT_EQ(server_->stats().rejected, cases.size());
}

TEST_F(TcpDataServerTest, ReexportChangesTheKey) {
  const uint64_t old_key = Key(rw_);
  ASSERT_TRUE(regions_.table
                  .Export(regions_.root, {rw_->id(), ""},
                          core::RemoteAccess::kReadWrite)
                  .ok());
  ASSERT_NE(Key(rw_), old_key);
  ASSERT_TRUE(conn_->Send(EncodeRequestFrame(FrameType::kRead, 1, rw_->id(),
                                             old_key, 0, 8))
                  .ok());
  auto reply = conn_->ReadReply();
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->status().code(), absl::StatusCode::kPermissionDenied);
  // Revoked: NOT_FOUND.
  ASSERT_TRUE(regions_.table
                  .Export(regions_.root, {rw_->id(), ""}, core::RemoteAccess::kNone)
                  .ok());
  ASSERT_TRUE(conn_->Send(EncodeRequestFrame(FrameType::kRead, 2, rw_->id(),
                                             old_key, 0, 8))
                  .ok());
  reply = conn_->ReadReply();
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->status().code(), absl::StatusCode::kNotFound);
}

// A connection checks a run of requests for one export against the terms
// it checked the first against: each change of the export, or of the peers
// it admits, must still reach the very next request on that connection.
TEST_F(TcpDataServerTest, EachExportChangeReachesTheNextRequest) {
  uint64_t id = 0;
  auto write = [&](uint64_t key) {
    const std::string data = "abcd";
    EXPECT_TRUE(conn_->Send(EncodeRequestFrame(FrameType::kWrite, ++id,
                                               rw_->id(), key, 0, data.size(),
                                               data))
                    .ok());
    auto reply = conn_->ReadReply();
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? reply->status() : reply.status();
  };
  auto reexport = [&](core::RemoteAccess access,
                      std::shared_ptr<core::ExportAccessList> allow = nullptr) {
    ASSERT_TRUE(regions_.table
                    .Export(regions_.root, {rw_->id(), ""}, access,
                            std::move(allow))
                    .ok());
  };
  const uint64_t first = Key(rw_);
  ASSERT_TRUE(write(first).ok());
  ASSERT_TRUE(write(first).ok());

  // Exported again read-only: the old key and the new one are refused.
  reexport(core::RemoteAccess::kRead);
  EXPECT_EQ(write(first).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(write(Key(rw_)).code(), absl::StatusCode::kPermissionDenied);

  // To certificate peers only: 127.0.0.1 is refused until a certificate
  // peer's Resolve from it admits its data path...
  auto certs_only = core::ExportAccessList::Parse({{"cert:b", std::nullopt}});
  ASSERT_TRUE(certs_only.ok());
  reexport(core::RemoteAccess::kReadWrite,
           std::make_shared<core::ExportAccessList>(*certs_only));
  const uint64_t guarded = Key(rw_);
  EXPECT_EQ(write(guarded).code(), absl::StatusCode::kPermissionDenied);
  rw_->AdmitDataPeer("127.0.0.1");
  ASSERT_TRUE(write(guarded).ok());
  // ...and refused again once newer admissions have pushed it out.
  for (int i = 0; i < 256; ++i) {
    rw_->AdmitDataPeer(absl::StrCat("10.9.", i / 200, ".", i % 200 + 1));
  }
  EXPECT_EQ(write(guarded).code(), absl::StatusCode::kPermissionDenied);

  // Revoked: NOT_FOUND, and nothing of the refused WRITEs landed.
  reexport(core::RemoteAccess::kReadWrite);
  ASSERT_TRUE(write(Key(rw_)).ok());
  const uint64_t last = Key(rw_);
  reexport(core::RemoteAccess::kNone);
  FillPattern(rw_->data(), kSize, rw_->id());
  EXPECT_EQ(write(last).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Untouched());
}

TEST_F(TcpDataServerTest, GarbageClosesTheConnection) {
  ASSERT_TRUE(conn_->Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  EXPECT_TRUE(conn_->ClosedByPeer());
  // The server itself carries on.
  auto other = RawConnection::Connect(server_->port());
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(other->Send(EncodeRequestFrame(FrameType::kRead, 1, rw_->id(),
                                             Key(rw_), 0, 4))
                  .ok());
  auto reply = other->ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->status().ok());
  EXPECT_GE(server_->stats().protocol_errors, 1u);
}

TEST_F(TcpDataServerTest, OversizedFrameClosesTheConnection) {
  ASSERT_TRUE(conn_->Send(EncodeRequestFrame(FrameType::kWrite, 1, rw_->id(),
                                             Key(rw_), 0,
                                             kMaxFramePayload + 1))
                  .ok());
  EXPECT_TRUE(conn_->ClosedByPeer());
  EXPECT_TRUE(Untouched());
}

TEST_F(TcpDataServerTest, ReplyFrameFromClientClosesTheConnection) {
  ASSERT_TRUE(conn_->Send(EncodeReplyFrame(FrameType::kWriteReply, 1,
                                           absl::OkStatus(), ""))
                  .ok());
  EXPECT_TRUE(conn_->ClosedByPeer());
}

TEST_F(TcpDataServerTest, FreeDuringWriteIsABarrier) {
  // Send the header and half of the payload, free the region, then the
  // rest: once Free returned, no byte of it lands, the WRITE is answered
  // NOT_FOUND, and the memory stays mapped until the server lets go.
  auto doomed = regions_.Make("doomed", kSize, core::RemoteAccess::kReadWrite);
  ASSERT_NE(doomed, nullptr);
  std::weak_ptr<core::Region> weak = doomed;
  const std::string data(kSize, 'q');
  const std::string frame = EncodeRequestFrame(
      FrameType::kWrite, 5, doomed->id(), Key(doomed), 0, data.size(), data);
  ASSERT_TRUE(conn_->Send(frame.substr(0, frame.size() / 2)).ok());
  // Likely mid-WRITE by now; the assertions hold either way.
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(regions_.table.Free(regions_.root, {doomed->id(), ""}).ok());
  const std::string after_free(doomed->data(), kSize);
  ASSERT_TRUE(conn_->Send(frame.substr(frame.size() / 2)).ok());
  auto reply = conn_->ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->status().code(), absl::StatusCode::kNotFound)
      << reply->status();
  EXPECT_EQ(std::string(doomed->data(), kSize), after_free)
      << "bytes landed after Free returned";
  EXPECT_NE(after_free, data);  // the WRITE was cut, not completed
  // The connection is still usable.
  auto other = regions_.Make("other", kSize, core::RemoteAccess::kReadWrite);
  ASSERT_TRUE(conn_
                  ->Send(EncodeRequestFrame(FrameType::kWrite, 6, other->id(),
                                            Key(other), 0, 4, "abcd"))
                  .ok());
  reply = conn_->ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->status().ok()) << reply->status();
  // Released once the WRITE was done with it.
  doomed.reset();
  for (int i = 0; i < 100 && !weak.expired(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(weak.expired());
}

// A READ reply is sent from the region only while its export stands: the
// replies still queued when the export is revoked go out as errors (or, for
// one already partly sent, the connection is closed), so no byte the owner
// writes after the revocation ever leaves.
TEST_F(TcpDataServerTest, UnexportStopsQueuedReadReplies) {
  constexpr uint64_t kBig = 8 << 20;
  auto big = regions_.Make("big", kBig, core::RemoteAccess::kRead);
  ASSERT_NE(big, nullptr);
  std::memset(big->data(), 'o', kBig);  // "old": before the revocation
  // Far more READ payload than the socket buffers hold, unread.
  constexpr int kReads = 24;
  for (int i = 0; i < kReads; ++i) {
    ASSERT_TRUE(conn_
                    ->Send(EncodeRequestFrame(FrameType::kRead, 1000 + i,
                                              big->id(), Key(big), 0, kBig))
                    .ok());
  }
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_TRUE(
      regions_.table
          .Export(regions_.root, {big->id(), ""}, core::RemoteAccess::kNone)
          .ok());
  std::memset(big->data(), 'N', kBig);  // "new": must never be sent
  int ok = 0;
  int refused = 0;
  for (int i = 0; i < kReads; ++i) {
    auto reply = conn_->ReadReply();
    if (!reply.ok()) break;  // closed after a partly sent reply
    if (reply->status().ok()) {
      ++ok;
      EXPECT_EQ(reply->payload.find('N'), std::string::npos)
          << "bytes written after the unexport were sent";
    } else {
      ++refused;
      EXPECT_EQ(reply->status().code(), absl::StatusCode::kNotFound);
    }
  }
  // The socket buffers cannot hold 24 x 8 MiB: the revocation cut the
  // sequence somewhere.
  EXPECT_LT(ok, kReads);
  ::testing::Test::RecordProperty("replies_refused", refused);
}

// A peer that sends small requests and reads none of the replies: every
// reply waits in the daemon's memory (a rejected 48-byte READ's reply
// carries a few hundred bytes of message), and the READ payload bound does
// not see them. The connection must stop reading once its replies hold
// max_queued_reply_memory, and carry on once the peer reads them.
TEST_F(TcpDataServerTest, APeerThatReadsNoRepliesStopsBeingRead) {
  TcpDataServerOptions options;
  options.listen = "127.0.0.1:0";
  options.tuning.buffer_bytes = 64 << 10;  // small socket buffers
  auto server = TcpDataServer::Start(&regions_.table, options, runtime_.get());
  ASSERT_TRUE(server.ok()) << server.status();
  auto conn = RawConnection::Connect((*server)->port());
  ASSERT_TRUE(conn.ok()) << conn.status();
  const int small = 64 << 10;
  ::setsockopt(conn->fd(), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  ::setsockopt(conn->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));

  // 50000 READs with a wrong key (2.4 MB of requests, some 20 MB of
  // replies): far more than the socket buffers and the bound together.
  constexpr uint64_t kRequests = 50000;
  std::string requests;
  for (uint64_t i = 0; i < kRequests; ++i) {
    requests += EncodeRequestFrame(FrameType::kRead, i, rw_->id(),
                                   Key(rw_) ^ 1, 0, 16);
  }
  // Send without reading until the server stops taking them (no progress
  // for 2 s) or all are sent.
  size_t sent = 0;
  while (sent < requests.size()) {
    pollfd p{conn->fd(), POLLOUT, 0};
    if (::poll(&p, 1, 2000) == 0) break;  // stalled: the server stopped reading
    const ssize_t n = ::send(conn->fd(), requests.data() + sent,
                             requests.size() - sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) sent += static_cast<size_t>(n);
    if (n < 0) {
      ASSERT_TRUE(errno == EAGAIN || errno == EINTR) << errno;
    }
  }
  EXPECT_LT(sent, requests.size())
      << "the server took every request while its replies went unread";
  const uint64_t read_before_stall = (*server)->stats().requests;
  EXPECT_LT(read_before_stall, kRequests);
  ::testing::Test::RecordProperty("requests_read_unanswered",
                                  static_cast<int>(read_before_stall));

  // Once the replies are read, every request is answered, in order.
  uint64_t answered = 0;
  std::thread reader([&] {
    for (; answered < kRequests; ++answered) {
      auto reply = conn->ReadReply();
      if (!reply.ok() || reply->header.request_id != answered ||
          reply->status().code() != absl::StatusCode::kPermissionDenied) {
        return;
      }
    }
  });
  const absl::Status rest = conn->Send(requests.substr(sent));
  reader.join();
  EXPECT_TRUE(rest.ok()) << rest;
  EXPECT_EQ(answered, kRequests);
  EXPECT_EQ((*server)->stats().requests, kRequests);
}

// Requests read in one go past the reply bound wait in the receive buffer
// while reading pauses; once the replies are out they are served without
// the peer sending another byte (the socket has nothing more to report
// them by).
// Replies of 1 KiB all fit in the socket: reading resumes as soon as they
// are sent. Of 16 KiB they do not: it resumes once the peer reads them.
class TcpDataServerPauseTest : public TcpDataServerTest,
                               public ::testing::WithParamInterface<uint64_t> {
};

TEST_P(TcpDataServerPauseTest, RequestsBufferedWhileReadingPausedAreServed) {
  const uint64_t size = GetParam();
  TcpDataServerOptions options;
  options.listen = "127.0.0.1:0";
  options.max_queued_reply_bytes = 2 * size;  // two READ replies
  auto server = TcpDataServer::Start(&regions_.table, options, runtime_.get());
  ASSERT_TRUE(server.ok()) << server.status();
  auto conn = RawConnection::Connect((*server)->port());
  ASSERT_TRUE(conn.ok()) << conn.status();
  // 300 requests (14 KiB) in one send: one read takes them all.
  constexpr uint64_t kRequests = 300;
  std::string requests;
  for (uint64_t i = 0; i < kRequests; ++i) {
    requests += EncodeRequestFrame(FrameType::kRead, i, rw_->id(), Key(rw_),
                                   0, size);
  }
  ASSERT_TRUE(conn->Send(requests).ok());
  for (uint64_t i = 0; i < kRequests; ++i) {
    auto reply = conn->ReadReply();
    ASSERT_TRUE(reply.ok()) << "reply " << i << ": " << reply.status();
    ASSERT_EQ(reply->header.request_id, i);
    ASSERT_TRUE(reply->status().ok()) << reply->status();
    ASSERT_EQ(reply->payload.size(), size);
  }
}

INSTANTIATE_TEST_SUITE_P(ReplySizes, TcpDataServerPauseTest,
                         ::testing::Values(1 << 10, 16 << 10));

// The stall timeout: a connection that sends nothing, or stops in the
// middle of a request, loses its slot; one idle between requests keeps it.
class TcpDataServerStallTest : public TcpDataServerTest {
 protected:
  static constexpr absl::Duration kStall = absl::Milliseconds(200);

  void SetUp() override {
    TcpDataServerTest::SetUp();
    TcpDataServerOptions options;
    options.listen = "127.0.0.1:0";
    options.stall_timeout = kStall;
    auto server = TcpDataServer::Start(&regions_.table, options, runtime_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    stalling_ = *std::move(server);
  }

  // A connection to the stalling server whose reads give up after 20 s, so
  // that a server that never closes it fails the test instead of hanging.
  RawConnection Connect() {
    auto conn = RawConnection::Connect(stalling_->port());
    EXPECT_TRUE(conn.ok()) << conn.status();
    timeval patience{20, 0};
    ::setsockopt(conn->fd(), SOL_SOCKET, SO_RCVTIMEO, &patience,
                 sizeof(patience));
    return *std::move(conn);
  }

  std::unique_ptr<TcpDataServer> stalling_;
};

TEST_F(TcpDataServerStallTest, AConnectionThatSendsNothingIsClosed) {
  RawConnection conn = Connect();
  EXPECT_TRUE(conn.ClosedByPeer()) << "still open after 20 s";
  EXPECT_EQ(stalling_->stats().stalled, 1u);
}

TEST_F(TcpDataServerStallTest, HalfARequestIsClosed) {
  RawConnection conn = Connect();
  const std::string frame =
      EncodeRequestFrame(FrameType::kRead, 1, rw_->id(), Key(rw_), 0, 4);
  ASSERT_TRUE(conn.Send(frame.substr(0, frame.size() / 2)).ok());
  EXPECT_TRUE(conn.ClosedByPeer()) << "still open after 20 s";
  // And a WRITE whose payload stops short.
  RawConnection writer = Connect();
  ASSERT_TRUE(writer.Send(EncodeRequestFrame(FrameType::kWrite, 2, rw_->id(),
                                             Key(rw_), 0, 1000,
                                             std::string(1000, 'x'))
                              .substr(0, kRequestHeaderSize + 10))
                  .ok());
  EXPECT_TRUE(writer.ClosedByPeer()) << "still open after 20 s";
  EXPECT_EQ(stalling_->stats().stalled, 2u);
}

TEST_F(TcpDataServerStallTest, AConnectionIdleBetweenRequestsStaysOpen) {
  RawConnection conn = Connect();
  for (uint64_t id = 1; id <= 2; ++id) {
    ASSERT_TRUE(conn.Send(EncodeRequestFrame(FrameType::kRead, id, rw_->id(),
                                             Key(rw_), 0, 4))
                    .ok());
    auto reply = conn.ReadReply();
    ASSERT_TRUE(reply.ok()) << "request " << id << ": " << reply.status();
    EXPECT_EQ(reply->header.request_id, id);
    EXPECT_TRUE(reply->status().ok()) << reply->status();
    // Five stall timeouts with nothing under way.
    absl::SleepFor(5 * kStall);
  }
  EXPECT_EQ(stalling_->stats().stalled, 0u);
}

// With an access list, a data connection must come from an admitted
// address (the key alone is not enough).
TEST_F(TcpDataServerTest, AccessListRefusesOtherAddresses) {
  auto list = core::ExportAccessList::Parse({{"127.0.0.1", std::nullopt}});
  ASSERT_TRUE(list.ok());
  auto guarded =
      regions_.Make("guarded", kSize, core::RemoteAccess::kReadWrite);
  ASSERT_TRUE(regions_.table
                  .Export(regions_.root, {guarded->id(), ""},
                          core::RemoteAccess::kReadWrite,
                          std::make_shared<core::ExportAccessList>(*list))
                  .ok());
  FillPattern(guarded->data(), kSize, 5);
  auto other = RawConnection::Connect(server_->port(), "127.0.0.2");
  ASSERT_TRUE(other.ok()) << other.status();
  ASSERT_TRUE(other
                  ->Send(EncodeRequestFrame(FrameType::kWrite, 1, guarded->id(),
                                            Key(guarded), 0, 4, "evil"))
                  .ok());
  auto reply = other->ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(reply->message, HasSubstr("does not admit data connections"));
  ASSERT_TRUE(other
                  ->Send(EncodeRequestFrame(FrameType::kRead, 2, guarded->id(),
                                            Key(guarded), 0, 16))
                  .ok());
  reply = other->ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->status().code(), absl::StatusCode::kPermissionDenied);
  std::string expect(kSize, '\0');
  FillPattern(expect.data(), kSize, 5);
  EXPECT_EQ(std::memcmp(expect.data(), guarded->data(), kSize), 0);
  // From the admitted address it works.
  ASSERT_TRUE(conn_
                  ->Send(EncodeRequestFrame(FrameType::kWrite, 3, guarded->id(),
                                            Key(guarded), 0, 4, "good"))
                  .ok());
  reply = conn_->ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->status().ok()) << reply->status();
}

TEST_F(TcpDataServerTest, AcceptAdvertisesEndpoint) {
  v1::ConnectRequest request;
  request.set_transport(v1::TRANSPORT_TCP);
  request.set_tcp_connections(100);
  v1::ConnectResponse response;
  ASSERT_TRUE(server_->Accept(request, "127.0.0.1", &response).ok());
  EXPECT_EQ(response.tcp().host(), "127.0.0.1");
  EXPECT_EQ(response.tcp().port(), server_->port());
  EXPECT_EQ(response.tcp().connections(), 16u);
  EXPECT_TRUE(response.tcp().identify()) << "it takes an IDENTIFY frame";
}

// The owner learns who wrote: the address the connecting daemon named in
// its IDENTIFY frame, or else the address the connection comes from. The
// reply is OK once the data is in place, whatever room the owner has.
TEST_F(TcpDataServerTest, AWriteImmNamesItsWriter) {
  ASSERT_TRUE(conn_
                  ->Send(EncodeRequestFrame(FrameType::kWriteImm, 1, rw_->id(),
                                            Key(rw_), 64, 4, "imm1", 0xabc))
                  .ok());
  auto reply = conn_->ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->status().ok()) << reply->status();
  auto named = RawConnection::Connect(server_->port());
  ASSERT_TRUE(named.ok());
  ASSERT_TRUE(named
                  ->Send(EncodeIdentifyFrame("node-b.example:7471") +
                         EncodeRequestFrame(FrameType::kWriteImm, 2, rw_->id(),
                                            Key(rw_), 128, 4, "imm2", 0xdef))
                  .ok());
  reply = named->ReadReply();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->header.request_id, 2u) << "IDENTIFY has no reply";
  EXPECT_TRUE(reply->status().ok()) << reply->status();

  const std::vector<RecordingSink::Seen> seen = sink_.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].region, rw_->id());
  EXPECT_EQ(seen[0].offset, 64u);
  EXPECT_EQ(seen[0].length, 4u);
  EXPECT_EQ(seen[0].immediate, 0xabcu);
  EXPECT_EQ(seen[0].transport, core::TransportKind::kTcp);
  EXPECT_EQ(seen[0].writer, "127.0.0.1") << "not named: its source address";
  EXPECT_FALSE(seen[0].writer_uid.has_value()) << "a remote writer";
  EXPECT_EQ(seen[1].writer, "node-b.example:7471");
  EXPECT_EQ(seen[1].immediate, 0xdefu);
  EXPECT_EQ(std::string(rw_->data() + 128, 4), "imm2");
}

// The server reads as many frames as the socket holds at once, and a
// payload larger than its receive buffer straight to its place: however
// the bytes are cut on the way (all in one send, one byte at a time, or
// pieces that end anywhere in a header or a payload), every request is
// answered in order and every byte lands where it belongs.
class TcpDataServerCutTest : public TcpDataServerTest,
                             public ::testing::WithParamInterface<size_t> {};

TEST_P(TcpDataServerCutTest, FramesAreServedHoweverTheyAreCut) {
  const size_t cut = GetParam();  // 0: all in one send
  struct Piece {
    uint64_t offset, length;
  };
  // Smaller and larger than the receive buffer (16 KiB).
  const Piece pieces[] = {{0, 8}, {100, 20000}, {24000, 40000}};
  std::vector<std::string> data;
  std::string stream = EncodeIdentifyFrame("node-c.example:7471");
  uint64_t id = 1;
  for (const Piece& p : pieces) {
    data.emplace_back(p.length, '\0');
    FillPattern(data.back().data(), p.length, 1000 + id);
    stream += EncodeRequestFrame(FrameType::kWrite, id++, rw_->id(), Key(rw_),
                                 p.offset, p.length, data.back());
  }
  stream += EncodeRequestFrame(FrameType::kWriteImm, id++, rw_->id(),
                               Key(rw_), 20200, 16, std::string(16, 'i'), 7);
  // Rejected WRITEs: their payloads (one larger than the buffer) drained.
  stream += EncodeRequestFrame(FrameType::kWrite, id++, rw_->id(),
                               Key(rw_) ^ 1, 0, 17000, std::string(17000, 'x'));
  stream += EncodeRequestFrame(FrameType::kWrite, id++, ro_->id(), Key(ro_), 0,
                               300, std::string(300, 'x'));
  for (const Piece& p : pieces) {
    stream += EncodeRequestFrame(FrameType::kRead, id++, rw_->id(), Key(rw_),
                                 p.offset, p.length);
  }
  const uint64_t requests = id - 1;

  const int one = 1;
  ::setsockopt(conn_->fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::thread sender([&] {
    const size_t step = cut == 0 ? stream.size() : cut;
    for (size_t at = 0; at < stream.size(); at += step) {
      ASSERT_TRUE(conn_->Send(stream.substr(at, step)).ok());
    }
  });
  std::vector<RawConnection::Reply> replies;
  for (uint64_t i = 0; i < requests; ++i) {
    auto reply = conn_->ReadReply();
    ASSERT_TRUE(reply.ok()) << reply.status();
    replies.push_back(*std::move(reply));
  }
  sender.join();

  for (uint64_t i = 0; i < requests; ++i) {
    EXPECT_EQ(replies[i].header.request_id, i + 1);
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(replies[i].status().ok()) << i << ": " << replies[i].status();
  }
  EXPECT_EQ(replies[4].status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(replies[5].status().code(), absl::StatusCode::kPermissionDenied);
  for (size_t i = 0; i < data.size(); ++i) {
    EXPECT_TRUE(replies[6 + i].status().ok()) << replies[6 + i].status();
    EXPECT_TRUE(replies[6 + i].payload == data[i]) << "READ " << i;
    EXPECT_EQ(std::memcmp(rw_->data() + pieces[i].offset, data[i].data(),
                          data[i].size()),
              0)
        << "WRITE " << i;
  }
  EXPECT_EQ(std::string(rw_->data() + 20200, 16), std::string(16, 'i'));
  const std::vector<RecordingSink::Seen> seen = sink_.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].offset, 20200u);
  EXPECT_EQ(seen[0].writer, "node-c.example:7471");
  std::string ro(kSize, '\0');
  FillPattern(ro.data(), kSize, ro_->id());
  EXPECT_EQ(std::memcmp(ro_->data(), ro.data(), kSize), 0);
  ExpectConnectionWorks();
}

INSTANTIATE_TEST_SUITE_P(Cuts, TcpDataServerCutTest,
                         ::testing::Values(0, 1, 7, 47, 4096, 16385));

// An IDENTIFY is the first frame of a connection and names a Peer address;
// anything else closes the connection before it names any writer.
TEST_F(TcpDataServerTest, AnIdentifyComesFirstAndNamesAnAddress) {
  ExpectConnectionWorks();
  ASSERT_TRUE(conn_->Send(EncodeIdentifyFrame("10.0.0.9:7471")).ok());
  EXPECT_TRUE(conn_->ClosedByPeer()) << "after the first frame";
  for (const std::string& bad :
       {EncodeIdentifyFrame("not an address"),
        EncodeIdentifyFrame("10.0.0.9:74\n71"),
        EncodeRequestFrame(FrameType::kIdentify, 0, rw_->id(), 0, 0, 13,
                           "10.0.0.9:7471"),
        EncodeRequestFrame(FrameType::kIdentify, 0, 0, 0, 0,
                           kMaxIdentityLength + 1,
                           std::string(kMaxIdentityLength + 1, 'a'))}) {
    auto other = RawConnection::Connect(server_->port());
    ASSERT_TRUE(other.ok());
    ASSERT_TRUE(
        other
            ->Send(bad + EncodeRequestFrame(FrameType::kWriteImm, 3, rw_->id(),
                                            Key(rw_), 0, 4, "evil", 1))
            .ok());
    EXPECT_TRUE(other->ClosedByPeer()) << bad;
  }
  EXPECT_TRUE(sink_.seen().empty());
  EXPECT_TRUE(Untouched());
  EXPECT_GE(server_->stats().protocol_errors, 5u);
}

TEST_F(TcpDataServerTest, StopIsIdempotentAndClosesConnections) {
  server_->Stop();
  EXPECT_TRUE(conn_->ClosedByPeer());
  server_->Stop();
}

}  // namespace
}  // namespace rdmad::tcp
