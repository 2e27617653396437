// Every malformed request the API admits, table-driven, against real
// daemons: each gets a precise status code and a message that says what is
// wrong. Meanwhile another client moves checksummed data between the same
// daemons; afterwards both daemons are up and every one of its transfers
// arrived intact.
//
// Covered: offsets/lengths past the end, offset+length overflow (local and
// remote), zero and huge sizes, sizes over the pinned-memory limit, unknown,
// freed and foreign regions, bad names, stale and damaged descriptors,
// missing and foreign session tokens, unknown enum values, oversized
// batches and gRPC messages, bad peer addresses; garbage bytes on the TCP
// data port and on the Peer gRPC port; malformed Peer calls.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/raw_session.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

int PortOf(const std::string& host_port) {
  return std::stoi(host_port.substr(host_port.rfind(':') + 1));
}

// Connects to 127.0.0.1:port, sends `bytes`, and reports whether the daemon
// closed the connection (recv 0 or reset) within 10 s.
bool SendGarbageAndSeeClose(int port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return false;
  }
  (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  bool closed = false;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n > 0) continue;  // e.g. an HTTP/2 GOAWAY first
    closed = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
    break;
  }
  ::close(fd);
  return closed;
}

struct Case {
  std::string name;
  std::function<grpc::Status()> call;
  grpc::StatusCode code;
  std::string fragment;
};

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A small pinned budget so "over the limit" is cheap to ask for.
    const DaemonOptions options{.config = "max_pinned_bytes: 268435456\n"};
    ASSERT_NO_FATAL_FAILURE(StartDaemon(dir_, "a", &a_, options));
    ASSERT_NO_FATAL_FAILURE(StartDaemon(dir_, "b", &b_, options));
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> a_;
  std::unique_ptr<DaemonProcess> b_;
};

// Moves checksummed blocks A -> B -> back until told to stop.
struct Bystander {
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  std::atomic<int> failures{0};
  std::string first_error;
};

void RunBystander(const DaemonProcess& a, const DaemonProcess& b,
                  Bystander* state) {
  auto ca = Client::Connect({.socket_path = a.socket()});
  auto cb = Client::Connect({.socket_path = b.socket()});
  if (!ca.ok() || !cb.ok()) {
    state->failures++;
    state->first_error = "bystander could not connect";
    return;
  }
  constexpr uint64_t kBlock = 256 << 10;
  if (!(*cb)->CreateRegion("bystander", kBlock, Access::kReadWrite).ok()) {
    state->failures++;
    state->first_error = "bystander could not create its region";
    return;
  }
  auto out = (*ca)->Allocate(kBlock);
  auto in = (*ca)->Allocate(kBlock);
  if (!out.ok() || !in.ok()) {
    state->failures++;
    return;
  }
  RemoteRegion target;
  target.peer = b.peer_address();
  target.name = "bystander";
  uint32_t seed = 1;
  while (!state->stop.load()) {
    for (uint64_t i = 0; i < kBlock; ++i) {
      seed = seed * 1103515245 + 12345;
      out->data()[i] = static_cast<char>(seed >> 16);
    }
    auto w = (*ca)->Write(*out, 0, target, 0, kBlock);
    auto r = w.ok() ? (*ca)->Read(*in, 0, target, 0, kBlock) : w;
    if (!r.ok() || std::memcmp(out->data(), in->data(), kBlock) != 0) {
      if (state->failures++ == 0) {
        state->first_error = r.ok() ? "checksum mismatch" : r.status().ToString();
      }
    }
    state->rounds++;
  }
}

TEST_F(BadInputTest, EveryMalformedRequestGetsAPreciseStatus) {
  Bystander bystander;
  std::thread bystander_thread(RunBystander, std::cref(*a_), std::cref(*b_),
                               &bystander);

  auto sa = RawSession::Open(a_->socket());
  ASSERT_TRUE(sa.ok()) << sa.status();
  auto other = RawSession::Open(a_->socket());
  ASSERT_TRUE(other.ok()) << other.status();
  RawSession& s = **sa;
  auto cb = Client::Connect({.socket_path = b_->socket()});
  ASSERT_TRUE(cb.ok());
  ASSERT_TRUE((*cb)->CreateRegion("dst", 4096, Access::kReadWrite).ok());
  ASSERT_TRUE((*cb)->CreateRegion("doomed", 4096, Access::kReadWrite).ok());
  auto doomed = (*cb)->GetDescriptor("doomed");
  ASSERT_TRUE(doomed.ok());
  ASSERT_TRUE((*cb)->FreeRegion("doomed").ok());

  auto allocate = [&](RawSession& session, const std::string& name,
                      uint64_t size, bool daemon_owned,
                      v1::AllocateBufferResponse* out = nullptr) {
    grpc::ClientContext ctx;
    session.Authorize(&ctx);
    v1::AllocateBufferRequest request;
    request.set_name(name);
    request.set_size(size);
    request.set_daemon_owned(daemon_owned);
    v1::AllocateBufferResponse response;
    grpc::Status st = session.stub().AllocateBuffer(&ctx, request, &response);
    if (out != nullptr) *out = response;
    return st;
  };
  ASSERT_TRUE(allocate(s, "buf", 8192, true).ok());
  {
    grpc::ClientContext ctx;
    s.Authorize(&ctx);
    v1::ExportRegionRequest request;
    request.mutable_region()->set_name("buf");
    request.set_access(v1::ACCESS_READ_WRITE);
    v1::ExportRegionResponse response;
    ASSERT_TRUE(s.stub().ExportRegion(&ctx, request, &response).ok());
  }
  v1::AllocateBufferResponse foreign;
  ASSERT_TRUE(allocate(**other, "", 4096, false, &foreign).ok());
  ASSERT_TRUE(allocate(s, "freed", 4096, true).ok());
  {
    grpc::ClientContext ctx;
    s.Authorize(&ctx);
    v1::FreeRegionRequest request;
    request.mutable_region()->set_name("freed");
    v1::FreeRegionResponse response;
    ASSERT_TRUE(s.stub().FreeRegion(&ctx, request, &response).ok());
  }

  // A transfer from "buf" to B's "dst" with fields overridden by `edit`.
  auto write = [&](std::function<void(v1::TransferOp*)> edit,
                   const std::string& token = "") {
    return [&, edit, token] {
      grpc::ClientContext ctx;
      if (token.empty()) {
        s.Authorize(&ctx);
      } else if (token != "none") {
        ctx.AddMetadata("rdmad-session", token);
      }
      v1::TransferRequest request;
      v1::TransferOp* op = request.mutable_op();
      op->mutable_local()->set_name("buf");
      op->mutable_remote()->set_peer(b_->peer_address());
      op->mutable_remote()->set_name("dst");
      op->set_length(16);
      edit(op);
      v1::TransferResponse response;
      return s.stub().Write(&ctx, request, &response);
    };
  };
  auto local_target = [](v1::TransferOp* op) {
    op->mutable_remote()->clear_peer();
    op->mutable_remote()->set_name("buf");
  };

  const std::string huge_name(5 << 20, 'x');
  std::vector<Case> cases = {
      {"local offset past the end",
       write([](v1::TransferOp* op) { op->set_local_offset(8192); }),
       grpc::StatusCode::OUT_OF_RANGE, "does not fit"},
      {"local length past the end",
       write([](v1::TransferOp* op) { op->set_length(8193); }),
       grpc::StatusCode::OUT_OF_RANGE, "does not fit"},
      {"local offset+length overflows",
       write([](v1::TransferOp* op) {
         op->set_local_offset(kMax);
         op->set_length(2);
       }),
       grpc::StatusCode::OUT_OF_RANGE, "does not fit"},
      {"remote offset past the end (peer)",
       write([](v1::TransferOp* op) { op->set_remote_offset(4096); }),
       grpc::StatusCode::OUT_OF_RANGE, "4096"},
      {"remote offset+length overflows (peer)",
       write([](v1::TransferOp* op) { op->set_remote_offset(kMax - 7); }),
       grpc::StatusCode::OUT_OF_RANGE, ""},
      {"remote offset past the end (this daemon)",
       write([&](v1::TransferOp* op) {
         local_target(op);
         op->set_remote_offset(8190);
       }),
       grpc::StatusCode::OUT_OF_RANGE, "does not fit"},
      {"remote overflow (this daemon)",
       write([&](v1::TransferOp* op) {
         local_target(op);
         op->set_remote_offset(kMax);
       }),
       grpc::StatusCode::OUT_OF_RANGE, "does not fit"},
      {"zero length", write([](v1::TransferOp* op) { op->set_length(0); }),
       grpc::StatusCode::INVALID_ARGUMENT, "length is 0"},
      {"unknown local region",
       write([](v1::TransferOp* op) { op->mutable_local()->set_name("nope"); }),
       grpc::StatusCode::NOT_FOUND, "no region named 'nope'"},
      {"unknown local region id",
       write([](v1::TransferOp* op) { op->mutable_local()->set_id(987654321); }),
       grpc::StatusCode::NOT_FOUND, "does not exist"},
      {"freed local region",
       write([](v1::TransferOp* op) { op->mutable_local()->set_name("freed"); }),
       grpc::StatusCode::NOT_FOUND, "freed"},
      {"no local region", write([](v1::TransferOp* op) { op->clear_local(); }),
       grpc::StatusCode::INVALID_ARGUMENT, "no region given"},
      {"local id 0", write([](v1::TransferOp* op) { op->mutable_local()->set_id(0); }),
       grpc::StatusCode::INVALID_ARGUMENT, "no region given"},
      {"bad local name",
       write([](v1::TransferOp* op) { op->mutable_local()->set_name("../etc"); }),
       grpc::StatusCode::INVALID_ARGUMENT, "must not start with"},
      {"another session's buffer",
       write([&](v1::TransferOp* op) {
         op->mutable_local()->set_id(foreign.region().id());
       }),
       grpc::StatusCode::PERMISSION_DENIED, "another client session"},
      {"unknown remote region",
       write([](v1::TransferOp* op) { op->mutable_remote()->set_name("nothere"); }),
       grpc::StatusCode::NOT_FOUND, "no exported region named 'nothere'"},
      {"no remote region",
       write([](v1::TransferOp* op) { op->mutable_remote()->clear_ref(); }),
       grpc::StatusCode::INVALID_ARGUMENT, "no remote region given"},
      {"stale descriptor (region freed)",
       write([&](v1::TransferOp* op) {
         op->mutable_remote()->set_encoded_descriptor(*doomed);
       }),
       grpc::StatusCode::NOT_FOUND, "not exported"},
      {"descriptor without prefix",
       write([](v1::TransferOp* op) {
         op->mutable_remote()->set_encoded_descriptor("hello");
       }),
       grpc::StatusCode::INVALID_ARGUMENT, "must start with 'rdmad1:'"},
      {"descriptor with bad base64",
       write([](v1::TransferOp* op) {
         op->mutable_remote()->set_encoded_descriptor("rdmad1:!!!!");
       }),
       grpc::StatusCode::INVALID_ARGUMENT, "bad base64"},
      {"descriptor that does not parse",
       write([](v1::TransferOp* op) {
         op->mutable_remote()->set_encoded_descriptor("rdmad1:_____w");
       }),
       grpc::StatusCode::INVALID_ARGUMENT, "damaged"},
      {"oversized descriptor",
       write([](v1::TransferOp* op) {
         op->mutable_remote()->set_encoded_descriptor(
             "rdmad1:" + std::string(5000, 'A'));
       }),
       grpc::StatusCode::INVALID_ARGUMENT, "far shorter"},
      {"peer without port",
       write([](v1::TransferOp* op) { op->mutable_remote()->set_peer("localhost"); }),
       grpc::StatusCode::INVALID_ARGUMENT, ""},
      {"unreachable peer",
       write([](v1::TransferOp* op) { op->mutable_remote()->set_peer("127.0.0.1:1"); }),
       grpc::StatusCode::UNAVAILABLE, "127.0.0.1:1"},
      {"no session token", write([](v1::TransferOp*) {}, "none"),
       grpc::StatusCode::UNAUTHENTICATED, "needs a session"},
      {"foreign session token",
       write([](v1::TransferOp*) {}, "0123456789abcdef0123456789abcdef"),
       grpc::StatusCode::UNAUTHENTICATED, "unknown or expired"},
      {"allocate size 0", [&] { return allocate(s, "", 0, false); },
       grpc::StatusCode::INVALID_ARGUMENT, "size is 0"},
      {"allocate huge size", [&] { return allocate(s, "", kMax, false); },
       grpc::StatusCode::INVALID_ARGUMENT, "larger than this node can register"},
      {"allocate over the pinned limit",
       [&] { return allocate(s, "", 512ull << 20, false); },
       grpc::StatusCode::RESOURCE_EXHAUSTED, "over max_pinned_bytes of 256 MiB"},
      {"daemon-owned without name", [&] { return allocate(s, "", 4096, true); },
       grpc::StatusCode::INVALID_ARGUMENT, "needs a name"},
      {"duplicate name", [&] { return allocate(s, "buf", 4096, true); },
       grpc::StatusCode::ALREADY_EXISTS, "already exists"},
      {"bad mode",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::AllocateBufferRequest request;
         request.set_name("m");
         request.set_size(4096);
         request.set_daemon_owned(true);
         request.set_mode(04777);
         v1::AllocateBufferResponse response;
         return s.stub().AllocateBuffer(&ctx, request, &response);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "read (4) and write (2)"},
      {"export with unknown access",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::ExportRegionRequest request;
         request.mutable_region()->set_name("buf");
         request.set_access(static_cast<v1::Access>(7));
         v1::ExportRegionResponse response;
         return s.stub().ExportRegion(&ctx, request, &response);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "unknown access value 7"},
      {"free a freed region",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::FreeRegionRequest request;
         request.mutable_region()->set_name("freed");
         v1::FreeRegionResponse response;
         return s.stub().FreeRegion(&ctx, request, &response);
       },
       grpc::StatusCode::NOT_FOUND, "no region named 'freed'"},
      {"descriptor of an unexported region",
       [&] {
         grpc::ClientContext ctx;
         (*other)->Authorize(&ctx);
         v1::GetDescriptorRequest request;
         request.mutable_region()->set_id(foreign.region().id());
         v1::GetDescriptorResponse response;
         return (*other)->stub().GetDescriptor(&ctx, request, &response);
       },
       grpc::StatusCode::FAILED_PRECONDITION, "is not exported"},
      {"register a descriptor never passed",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::RegisterBufferRequest request;
         request.set_fd_token(424242);
         request.set_size(4096);
         v1::RegisterBufferResponse response;
         return s.stub().RegisterBuffer(&ctx, request, &response);
       },
       grpc::StatusCode::NOT_FOUND, "no descriptor with token"},
      {"oversized batch",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::BatchRequest request;
         for (int i = 0; i < 4097; ++i) request.add_ops();
         v1::BatchResponse response;
         return s.stub().Batch(&ctx, request, &response);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "at most 4096"},
      // The inspection and permission calls.
      {"list regions with a forged page token",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::ListRegionsRequest request;
         request.set_page_token("not-a-token");
         v1::ListRegionsResponse response;
         return s.stub().ListRegions(&ctx, request, &response);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "next_page_token"},
      {"list queues with a forged page token",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::ListQueuesRequest request;
         request.set_page_token("-1");
         v1::ListQueuesResponse response;
         return s.stub().ListQueues(&ctx, request, &response);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "next_page_token"},
      {"list queues without a session",
       [&] {
         grpc::ClientContext ctx;
         v1::ListQueuesRequest request;
         v1::ListQueuesResponse response;
         return s.stub().ListQueues(&ctx, request, &response);
       },
       grpc::StatusCode::UNAUTHENTICATED, "session"},
      {"list regions by a bad name",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::ListRegionsRequest request;
         request.set_name("../etc");
         v1::ListRegionsResponse response;
         return s.stub().ListRegions(&ctx, request, &response);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "region name"},
      {"permissions without a session",
       [&] {
         grpc::ClientContext ctx;
         v1::SetRegionPermissionsRequest request;
         request.mutable_region()->set_name("buf");
         request.set_mode(0644);
         v1::SetRegionPermissionsResponse response;
         return s.stub().SetRegionPermissions(&ctx, request, &response);
       },
       grpc::StatusCode::UNAUTHENTICATED, "needs a session"},
      {"permissions of no region",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::SetRegionPermissionsRequest request;
         request.set_mode(0644);
         v1::SetRegionPermissionsResponse response;
         return s.stub().SetRegionPermissions(&ctx, request, &response);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "no region given"},
      {"permissions with bad bits",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::SetRegionPermissionsRequest request;
         request.mutable_region()->set_name("buf");
         request.set_mode(0xffffffff);
         v1::SetRegionPermissionsResponse response;
         return s.stub().SetRegionPermissions(&ctx, request, &response);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "read (4) and write (2)"},
      {"remote regions of a malformed peer",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::ListRemoteRegionsRequest request;
         request.set_peer("[::1");
         v1::ListRemoteRegionsResponse response;
         return s.stub().ListRemoteRegions(&ctx, request, &response);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "peer"},
      {"remote regions of an unreachable peer",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::ListRemoteRegionsRequest request;
         request.set_peer("127.0.0.1:1");
         v1::ListRemoteRegionsResponse response;
         return s.stub().ListRemoteRegions(&ctx, request, &response);
       },
       grpc::StatusCode::UNAVAILABLE, "cannot reach the daemon at 127.0.0.1:1"},
      {"stat of nothing",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::StatRegionRequest request;
         v1::StatRegionResponse response;
         return s.stub().StatRegion(&ctx, request, &response);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "no region given"},
      {"stat of a damaged descriptor",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::StatRegionRequest request;
         request.mutable_region()->set_encoded_descriptor("rdmad1:!!!!");
         v1::StatRegionResponse response;
         return s.stub().StatRegion(&ctx, request, &response);
       },
       grpc::StatusCode::INVALID_ARGUMENT, "bad base64"},
      {"stat of a missing local region",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::StatRegionRequest request;
         request.mutable_region()->set_name("nothere");
         v1::StatRegionResponse response;
         return s.stub().StatRegion(&ctx, request, &response);
       },
       grpc::StatusCode::NOT_FOUND, "no region named 'nothere'"},
      {"oversized gRPC message",
       [&] {
         grpc::ClientContext ctx;
         s.Authorize(&ctx);
         v1::AllocateBufferRequest request;
         request.set_name(huge_name);
         request.set_size(4096);
         v1::AllocateBufferResponse response;
         return s.stub().AllocateBuffer(&ctx, request, &response);
       },
       grpc::StatusCode::RESOURCE_EXHAUSTED, "larger than max"},
  };

  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    grpc::Status status = c.call();
    EXPECT_EQ(status.error_code(), c.code)
        << c.name << ": " << status.error_code() << " " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.fragment)) << c.name;
  }

  // Batch: a bad operation fails alone, with its own status.
  {
    grpc::ClientContext ctx;
    s.Authorize(&ctx);
    v1::BatchRequest request;
    request.add_ops();  // op unspecified
    v1::TransferOp* good = request.add_ops();
    good->set_op(v1::OP_WRITE);
    good->mutable_local()->set_name("buf");
    good->mutable_remote()->set_peer(b_->peer_address());
    good->mutable_remote()->set_name("dst");
    good->set_length(16);
    v1::TransferOp* bad = request.add_ops();
    *bad = *good;
    bad->set_remote_offset(kMax);
    v1::BatchResponse response;
    ASSERT_TRUE(s.stub().Batch(&ctx, request, &response).ok());
    ASSERT_EQ(response.results_size(), 3);
    EXPECT_EQ(response.results(0).code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(response.results(1).code(), 0);
    EXPECT_EQ(response.results(2).code(), grpc::StatusCode::OUT_OF_RANGE);
  }

  // Malformed Peer calls, as a rogue daemon would make them.
  auto peer = v1::Peer::NewStub(grpc::CreateChannel(
      b_->peer_address(), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    v1::ResolveRequest request;
    request.set_name("bad name!");
    v1::ResolveResponse response;
    grpc::Status st = peer->Resolve(&ctx, request, &response);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    v1::ConnectRequest request;
    request.set_transport(static_cast<v1::TransportKind>(99));
    v1::ConnectResponse response;
    grpc::Status st = peer->Connect(&ctx, request, &response);
    // Not a transport at all (an out-of-range enum): the request is bad.
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(st.error_message(), HasSubstr("is not a transport"));
  }
  {
    grpc::ClientContext ctx;
    v1::ConnectRequest request;
    request.set_transport(v1::TRANSPORT_TCP);
    request.set_target_incarnation(12345);
    v1::ConnectResponse response;
    grpc::Status st = peer->Connect(&ctx, request, &response);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(st.error_message(), HasSubstr("say Hello again"));
  }

  // Garbage on the TCP data port: the connection is closed, nothing else.
  const int data_port = DataPort(*b_);
  ASSERT_GT(data_port, 0) << b_->LogTail();
  EXPECT_TRUE(SendGarbageAndSeeClose(data_port, "GET / HTTP/1.1\r\n\r\n"));
  std::string oversized(48, '\0');
  const uint32_t magic = 0x31544452;
  std::memcpy(oversized.data(), &magic, 4);
  oversized[4] = 1;  // version
  oversized[5] = 1;  // WRITE
  const uint64_t too_long = 1ull << 40;
  std::memcpy(oversized.data() + 40, &too_long, 8);
  EXPECT_TRUE(SendGarbageAndSeeClose(data_port, oversized));
  std::string reply_to_server = oversized;
  reply_to_server[5] = static_cast<char>(0x81);
  EXPECT_TRUE(SendGarbageAndSeeClose(data_port, reply_to_server));
  // Garbage on the Peer gRPC port (not HTTP/2): closed.
  EXPECT_TRUE(SendGarbageAndSeeClose(PortOf(b_->peer_address()),
                                     std::string(1000, '\xff')));
  EXPECT_TRUE(SendGarbageAndSeeClose(PortOf(a_->peer_address()),
                                     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" +
                                         std::string(64, '\x01')));

  // Let the bystander finish a few more rounds after all of that.
  const int rounds_before = bystander.rounds.load();
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (bystander.rounds.load() < rounds_before + 3 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  bystander.stop = true;
  bystander_thread.join();
  EXPECT_EQ(bystander.failures.load(), 0) << bystander.first_error;
  EXPECT_GE(bystander.rounds.load(), rounds_before + 3);

  // Both daemons are still up and serving.
  for (DaemonProcess* d : {a_.get(), b_.get()}) {
    EXPECT_EQ(::kill(d->pid(), 0), 0) << d->LogTail();
    auto client = Client::Connect({.socket_path = d->socket()});
    ASSERT_TRUE(client.ok()) << client.status();
    EXPECT_TRUE((*client)->GetStatus().ok());
  }
}

}  // namespace
}  // namespace rdmad::testing
