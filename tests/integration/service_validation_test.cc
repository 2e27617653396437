// Request validation of both gRPC services, field by field and RPC by RPC:
// every field of every request missing, zero, at its maximum, overflowing,
// of the wrong kind (a peer where a name goes, a name with spaces or NULs,
// an enum value outside the enum), each with its one right status code. A
// body that does not parse at all is INVALID_ARGUMENT too (the callback API
// would say UNIMPLEMENTED, as if the method did not exist).
//
// Table-driven: one test per RPC, one row per field value. Real daemons on
// loopback; raw stubs, so that nothing is checked on the client side first.
#include <condition_variable>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/raw_session.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;
using Code = grpc::StatusCode;

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kMax32 = std::numeric_limits<uint32_t>::max();

// One row: a name, a request edit, and the code it must get.
template <typename Request>
struct Row {
  std::string name;
  std::function<void(Request*)> edit;
  Code code;
  std::string fragment = "";  // in the message, when given
};

class ServiceValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const DaemonOptions options{.config = "max_pinned_bytes: 268435456\n"};
    ASSERT_NO_FATAL_FAILURE(StartDaemon(dir_, "a", &a_, options));
    ASSERT_NO_FATAL_FAILURE(StartDaemon(dir_, "b", &b_, options));
    auto s = RawSession::Open(a_->socket());
    ASSERT_TRUE(s.ok()) << s.status();
    s_ = *std::move(s);
    auto cb = Connect(*b_);
    ASSERT_TRUE(cb);
    ASSERT_TRUE(cb->CreateRegion("dst", 4096, Access::kReadWrite).ok());
    // On A: a named region "buf" (exported rw), an unnamed session buffer.
    v1::AllocateBufferRequest named;
    named.set_name("buf");
    named.set_size(8192);
    named.set_daemon_owned(true);
    named.set_export_access(v1::ACCESS_READ_WRITE);
    v1::AllocateBufferResponse out;
    ASSERT_TRUE(Call(&v1::Local::Stub::AllocateBuffer, named, &out).ok());
    v1::AllocateBufferRequest anonymous;
    anonymous.set_size(4096);
    ASSERT_TRUE(Call(&v1::Local::Stub::AllocateBuffer, anonymous, &out).ok());
    anonymous_id_ = out.region().id();
    peer_ = v1::Peer::NewStub(grpc::CreateChannel(
        b_->peer_address(), grpc::InsecureChannelCredentials()));
  }

  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (v1::Local::Stub::*rpc)(grpc::ClientContext*,
                                                         const Request&,
                                                         Response*),
                    const Request& request, Response* response) {
    grpc::ClientContext context;
    s_->Authorize(&context);
    return (s_->stub().*rpc)(&context, request, response);
  }

  // Runs every row against `rpc` of the Local service, starting each from
  // `base`.
  template <typename Request, typename Response>
  void RunTable(grpc::Status (v1::Local::Stub::*rpc)(grpc::ClientContext*,
                                                     const Request&, Response*),
                const Request& base, const std::vector<Row<Request>>& rows) {
    RunRows<Response>(base, rows, [&](const Request& request, Response* out) {
      return Call(rpc, request, out);
    });
  }

  // The same against `rpc` of daemon B's Peer service.
  template <typename Request, typename Response>
  void RunPeerTable(grpc::Status (v1::Peer::Stub::*rpc)(grpc::ClientContext*,
                                                        const Request&,
                                                        Response*),
                    const Request& base,
                    const std::vector<Row<Request>>& rows) {
    RunRows<Response>(base, rows, [&](const Request& request, Response* out) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(30));
      return ((*peer_).*rpc)(&context, request, out);
    });
  }

  template <typename Response, typename Request, typename Send>
  static void RunRows(const Request& base, const std::vector<Row<Request>>& rows,
                      Send send) {
    for (const Row<Request>& row : rows) {
      SCOPED_TRACE(row.name);
      Request request = base;
      row.edit(&request);
      Response response;
      grpc::Status status = send(request, &response);
      EXPECT_EQ(status.error_code(), row.code)
          << row.name << ": " << status.error_code() << " "
          << status.error_message();
      EXPECT_THAT(status.error_message(), HasSubstr(row.fragment)) << row.name;
    }
  }

  // A 4 KiB buffer of another session on daemon A (kept open for the
  // test's life), for rows that name a region the caller does not own.
  uint64_t ForeignBufferId() {
    auto other = RawSession::Open(a_->socket());
    EXPECT_TRUE(other.ok()) << other.status();
    if (!other.ok()) return 0;
    v1::AllocateBufferRequest theirs;
    theirs.set_size(4096);
    v1::AllocateBufferResponse allocated;
    grpc::ClientContext context;
    (*other)->Authorize(&context);
    grpc::Status status =
        (*other)->stub().AllocateBuffer(&context, theirs, &allocated);
    EXPECT_TRUE(status.ok()) << status.error_message();
    others_.push_back(*std::move(other));
    return allocated.region().id();
  }

  // A unary call of `method` whose body is `bytes` (not a serialized
  // message of its type).
  static grpc::Status RawCall(const std::string& target,
                              const std::string& method,
                              const std::string& bytes) {
    auto channel =
        grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
    grpc::GenericStub stub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::Status status;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                   [&](grpc::Status s) {
                     std::lock_guard<std::mutex> lock(mu);
                     status = std::move(s);
                     done = true;
                     cv.notify_one();
                   });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    return status;
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> a_;
  std::unique_ptr<DaemonProcess> b_;
  std::unique_ptr<RawSession> s_;
  std::vector<std::unique_ptr<RawSession>> others_;  // ForeignBufferId's
  std::unique_ptr<v1::Peer::Stub> peer_;
  uint64_t anonymous_id_ = 0;
};

// Peer addresses of every wrong kind, for the fields that take one.
std::vector<std::pair<std::string, std::string>> BadPeers() {
  return {
      {"no port", "localhost"},
      {"port 0", "127.0.0.1:0"},
      {"port over 65535", "127.0.0.1:65536"},
      {"port with a sign", "127.0.0.1:+80"},
      {"port with a space", "127.0.0.1: 80"},
      {"leading space", " 127.0.0.1:7471"},
      {"space inside", "local host:7471"},
      {"embedded NUL", std::string("127.0.0.1\0:7471", 15)},
      {"NUL in the port", std::string("127.0.0.1:74\0"
                                      "71",
                                      15)},
      {"10 KB host", std::string(10000, 'a') + ":7471"},
      {"label over 63", std::string(64, 'a') + ".example:7471"},
      {"empty label", "a..b:7471"},
      {"unbracketed IPv6", "::1:7471"},
      {"bad IPv6", "[::g]:7471"},
      {"unclosed bracket", "[::1:7471"},
      {"a region address", "127.0.0.1:7471/name"},
  };
}

TEST_F(ServiceValidationTest, WriteAndRead) {
  v1::TransferRequest base;
  v1::TransferOp* op = base.mutable_op();
  op->mutable_local()->set_name("buf");
  op->mutable_remote()->set_peer(b_->peer_address());
  op->mutable_remote()->set_name("dst");
  op->set_length(16);
  std::vector<Row<v1::TransferRequest>> rows = {
      {"valid", [](auto*) {}, Code::OK},
      {"no op", [](auto* r) { r->clear_op(); }, Code::INVALID_ARGUMENT},
      {"op OP_READ in a Write",
       [](auto* r) { r->mutable_op()->set_op(v1::OP_READ); },
       Code::INVALID_ARGUMENT, "in a Write call"},
      {"op OP_WRITE", [](auto* r) { r->mutable_op()->set_op(v1::OP_WRITE); },
       Code::OK},
      {"op out of range",
       [](auto* r) { r->mutable_op()->set_op(static_cast<v1::OpType>(77)); },
       Code::INVALID_ARGUMENT, "unknown operation 77"},
      {"local missing", [](auto* r) { r->mutable_op()->clear_local(); },
       Code::INVALID_ARGUMENT},
      {"local id 0",
       [](auto* r) { r->mutable_op()->mutable_local()->set_id(0); },
       Code::INVALID_ARGUMENT},
      {"local id max",
       [](auto* r) { r->mutable_op()->mutable_local()->set_id(kMax64); },
       Code::NOT_FOUND},
      {"local name empty",
       [](auto* r) { r->mutable_op()->mutable_local()->set_name(""); },
       Code::INVALID_ARGUMENT},
      {"local name with a space",
       [](auto* r) { r->mutable_op()->mutable_local()->set_name("b uf"); },
       Code::INVALID_ARGUMENT},
      {"local name with a NUL",
       [](auto* r) {
         r->mutable_op()->mutable_local()->set_name(std::string("bu\0f", 4));
       },
       Code::INVALID_ARGUMENT},
      {"local name 129 chars",
       [](auto* r) {
         r->mutable_op()->mutable_local()->set_name(std::string(129, 'a'));
       },
       Code::INVALID_ARGUMENT},
      {"local name a peer address",
       [](auto* r) {
         r->mutable_op()->mutable_local()->set_name("127.0.0.1:7471");
       },
       Code::INVALID_ARGUMENT},
      {"local unknown",
       [](auto* r) { r->mutable_op()->mutable_local()->set_name("nope"); },
       Code::NOT_FOUND},
      {"local offset max",
       [](auto* r) { r->mutable_op()->set_local_offset(kMax64); },
       Code::OUT_OF_RANGE},
      {"local offset at the end",
       [](auto* r) { r->mutable_op()->set_local_offset(8192); },
       Code::OUT_OF_RANGE},
      {"local offset+length overflows",
       [](auto* r) {
         r->mutable_op()->set_local_offset(kMax64 - 7);
         r->mutable_op()->set_length(16);
       },
       Code::OUT_OF_RANGE},
      {"length 0", [](auto* r) { r->mutable_op()->set_length(0); },
       Code::INVALID_ARGUMENT},
      {"length max", [](auto* r) { r->mutable_op()->set_length(kMax64); },
       Code::OUT_OF_RANGE},
      {"remote missing", [](auto* r) { r->mutable_op()->clear_remote(); },
       Code::INVALID_ARGUMENT},
      {"remote ref missing",
       [](auto* r) { r->mutable_op()->mutable_remote()->clear_ref(); },
       Code::INVALID_ARGUMENT},
      {"remote name bad",
       [](auto* r) { r->mutable_op()->mutable_remote()->set_name("../x"); },
       Code::INVALID_ARGUMENT},
      {"remote name unknown",
       [](auto* r) { r->mutable_op()->mutable_remote()->set_name("nothere"); },
       Code::NOT_FOUND},
      {"remote descriptor empty",
       [](auto* r) {
         r->mutable_op()->mutable_remote()->set_encoded_descriptor("");
       },
       Code::INVALID_ARGUMENT},
      {"remote descriptor garbage",
       [](auto* r) {
         r->mutable_op()->mutable_remote()->set_encoded_descriptor("rdmad1:!!");
       },
       Code::INVALID_ARGUMENT},
      {"remote descriptor is a name",
       [](auto* r) {
         r->mutable_op()->mutable_remote()->set_encoded_descriptor("dst");
       },
       Code::INVALID_ARGUMENT},
      {"remote offset max",
       [](auto* r) { r->mutable_op()->set_remote_offset(kMax64); },
       Code::OUT_OF_RANGE},
      {"remote offset at the end",
       [](auto* r) { r->mutable_op()->set_remote_offset(4096); },
       Code::OUT_OF_RANGE},
      {"remote peer unreachable",
       [](auto* r) {
         r->mutable_op()->mutable_remote()->set_peer("127.0.0.1:1");
       },
       Code::UNAVAILABLE},
      {"this daemon, unknown name",
       [](auto* r) {
         r->mutable_op()->mutable_remote()->clear_peer();
         r->mutable_op()->mutable_remote()->set_name("nothere");
       },
       Code::NOT_FOUND},
      {"this daemon, offset past the end",
       [](auto* r) {
         r->mutable_op()->mutable_remote()->clear_peer();
         r->mutable_op()->mutable_remote()->set_name("buf");
         r->mutable_op()->set_remote_offset(8190);
       },
       Code::OUT_OF_RANGE},
  };
  for (const auto& [what, peer] : BadPeers()) {
    rows.push_back({absl::StrCat("remote peer: ", what),
                    [peer = peer](auto* r) {
                      r->mutable_op()->mutable_remote()->set_peer(peer);
                    },
                    Code::INVALID_ARGUMENT});
  }
  RunTable(&v1::Local::Stub::Write, base, rows);
  // Read mirrors Write; its op must not say OP_WRITE.
  RunTable(&v1::Local::Stub::Read, base,
           std::vector<Row<v1::TransferRequest>>{
               {"valid", [](auto*) {}, Code::OK},
               {"op OP_WRITE in a Read",
                [](auto* r) { r->mutable_op()->set_op(v1::OP_WRITE); },
                Code::INVALID_ARGUMENT, "in a Read call"},
               {"length 0", [](auto* r) { r->mutable_op()->set_length(0); },
                Code::INVALID_ARGUMENT},
               {"remote peer with a space",
                [](auto* r) {
                  r->mutable_op()->mutable_remote()->set_peer("a b:7471");
                },
                Code::INVALID_ARGUMENT},
           });
}

TEST_F(ServiceValidationTest, Batch) {
  v1::BatchRequest base;
  std::vector<Row<v1::BatchRequest>> rows = {
      {"empty", [](auto*) {}, Code::OK},
      {"4097 operations",
       [](auto* r) {
         for (int i = 0; i < 4097; ++i) r->add_ops();
       },
       Code::INVALID_ARGUMENT, "at most 4096"},
  };
  RunTable(&v1::Local::Stub::Batch, base, rows);
  // Per operation: each gets its own code, the call itself is OK.
  v1::BatchRequest request;
  auto add = [&](std::function<void(v1::TransferOp*)> edit) {
    v1::TransferOp* op = request.add_ops();
    op->set_op(v1::OP_WRITE);
    op->mutable_local()->set_name("buf");
    op->mutable_remote()->set_peer(b_->peer_address());
    op->mutable_remote()->set_name("dst");
    op->set_length(16);
    edit(op);
  };
  const std::vector<std::pair<Code, std::function<void(v1::TransferOp*)>>> ops =
      {
          {Code::OK, [](v1::TransferOp*) {}},
          {Code::INVALID_ARGUMENT, [](v1::TransferOp* op) { op->clear_op(); }},
          {Code::INVALID_ARGUMENT,
           [](v1::TransferOp* op) { op->set_op(static_cast<v1::OpType>(9)); }},
          {Code::INVALID_ARGUMENT,
           [](v1::TransferOp* op) { op->set_length(0); }},
          {Code::OUT_OF_RANGE,
           [](v1::TransferOp* op) { op->set_remote_offset(kMax64); }},
          {Code::INVALID_ARGUMENT,
           [](v1::TransferOp* op) {
             op->mutable_remote()->set_peer(std::string("h\0:1", 4));
           }},
          {Code::NOT_FOUND,
           [](v1::TransferOp* op) { op->mutable_local()->set_name("nope"); }},
      };
  for (const auto& [code, edit] : ops) add(edit);
  v1::BatchResponse response;
  ASSERT_TRUE(Call(&v1::Local::Stub::Batch, request, &response).ok());
  ASSERT_EQ(response.results_size(), static_cast<int>(ops.size()));
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(response.results(i).code(), static_cast<int>(ops[i].first))
        << "op " << i << ": " << response.results(i).message();
  }
}

TEST_F(ServiceValidationTest, AllocateBuffer) {
  v1::AllocateBufferRequest base;
  base.set_size(4096);
  std::vector<Row<v1::AllocateBufferRequest>> rows = {
      {"valid", [](auto*) {}, Code::OK},
      {"size 0", [](auto* r) { r->set_size(0); }, Code::INVALID_ARGUMENT},
      {"size max", [](auto* r) { r->set_size(kMax64); },
       Code::INVALID_ARGUMENT},
      {"size over the pinned budget",
       [](auto* r) { r->set_size(512ull << 20); }, Code::RESOURCE_EXHAUSTED},
      {"name with a space", [](auto* r) { r->set_name("a b"); },
       Code::INVALID_ARGUMENT},
      {"name with a NUL", [](auto* r) { r->set_name(std::string("a\0b", 3)); },
       Code::INVALID_ARGUMENT},
      {"name 129 chars", [](auto* r) { r->set_name(std::string(129, 'n')); },
       Code::INVALID_ARGUMENT},
      {"name a peer address", [](auto* r) { r->set_name("10.0.0.1:7471"); },
       Code::INVALID_ARGUMENT},
      {"name taken", [](auto* r) { r->set_name("buf"); }, Code::ALREADY_EXISTS},
      {"daemon-owned without a name",
       [](auto* r) { r->set_daemon_owned(true); }, Code::INVALID_ARGUMENT},
      {"export access out of range",
       [](auto* r) { r->set_export_access(static_cast<v1::Access>(4)); },
       Code::INVALID_ARGUMENT, "unknown access value 4"},
      {"export access negative",
       [](auto* r) { r->set_export_access(static_cast<v1::Access>(-1)); },
       Code::INVALID_ARGUMENT},
      {"export of an unnamed buffer",
       [](auto* r) { r->set_export_access(v1::ACCESS_READ); },
       Code::INVALID_ARGUMENT, "only named regions can be exported"},
      {"mode on a session buffer", [](auto* r) { r->set_mode(0600); },
       Code::INVALID_ARGUMENT},
      {"mode with execute bits",
       [](auto* r) {
         r->set_name("m1");
         r->set_daemon_owned(true);
         r->set_mode(0700);
       },
       Code::INVALID_ARGUMENT},
      {"mode max",
       [](auto* r) {
         r->set_name("m2");
         r->set_daemon_owned(true);
         r->set_mode(kMax32);
       },
       Code::INVALID_ARGUMENT},
      {"group on a session buffer", [](auto* r) { r->set_group(0); },
       Code::INVALID_ARGUMENT},
  };
  RunTable(&v1::Local::Stub::AllocateBuffer, base, rows);
}

TEST_F(ServiceValidationTest, RegisterBuffer) {
  v1::RegisterBufferRequest base;
  base.set_fd_token(424242);
  base.set_size(4096);
  std::vector<Row<v1::RegisterBufferRequest>> rows = {
      {"token never passed", [](auto*) {}, Code::NOT_FOUND},
      {"token 0", [](auto* r) { r->set_fd_token(0); }, Code::INVALID_ARGUMENT},
      {"size 0", [](auto* r) { r->set_size(0); }, Code::INVALID_ARGUMENT},
      {"name with a space", [](auto* r) { r->set_name("a b"); },
       Code::INVALID_ARGUMENT},
      {"export access out of range",
       [](auto* r) { r->set_export_access(static_cast<v1::Access>(12)); },
       Code::INVALID_ARGUMENT},
      {"export of an unnamed buffer",
       [](auto* r) { r->set_export_access(v1::ACCESS_READ_WRITE); },
       Code::INVALID_ARGUMENT, "only named regions can be exported"},
  };
  RunTable(&v1::Local::Stub::RegisterBuffer, base, rows);
}

TEST_F(ServiceValidationTest, RegisterDmabuf) {
  v1::RegisterDmabufRequest base;
  base.set_fd_token(424242);
  base.set_length(4096);
  std::vector<Row<v1::RegisterDmabufRequest>> rows = {
      {"token never passed", [](auto*) {}, Code::NOT_FOUND,
       "no descriptor with token"},
      {"token 0", [](auto* r) { r->set_fd_token(0); }, Code::INVALID_ARGUMENT,
       "pass the dma-buf"},
      {"length 0", [](auto* r) { r->set_length(0); }, Code::INVALID_ARGUMENT,
       "length is 0"},
      {"offset max", [](auto* r) { r->set_offset(kMax64); }, Code::NOT_FOUND},
      {"name with a space", [](auto* r) { r->set_name("a b"); },
       Code::INVALID_ARGUMENT},
      {"export access out of range",
       [](auto* r) { r->set_export_access(static_cast<v1::Access>(12)); },
       Code::INVALID_ARGUMENT},
  };
  RunTable(&v1::Local::Stub::RegisterDmabuf, base, rows);
}

// Rows for the RegionRef every region call takes, on top of `valid_code`
// for the valid one.
template <typename Request>
std::vector<Row<Request>> RefRows(Code valid_code, uint64_t foreign_id) {
  return {
      {"valid", [](auto*) {}, valid_code},
      {"region missing", [](auto* r) { r->clear_region(); },
       Code::INVALID_ARGUMENT},
      {"id 0", [](auto* r) { r->mutable_region()->set_id(0); },
       Code::INVALID_ARGUMENT},
      {"id max", [](auto* r) { r->mutable_region()->set_id(kMax64); },
       Code::NOT_FOUND},
      {"name empty", [](auto* r) { r->mutable_region()->set_name(""); },
       Code::INVALID_ARGUMENT},
      {"name with a NUL",
       [](auto* r) { r->mutable_region()->set_name(std::string("x\0", 2)); },
       Code::INVALID_ARGUMENT},
      {"name 10 KB",
       [](auto* r) { r->mutable_region()->set_name(std::string(10000, 'x')); },
       Code::INVALID_ARGUMENT},
      {"name unknown", [](auto* r) { r->mutable_region()->set_name("nope"); },
       Code::NOT_FOUND},
      {"another session's buffer",
       [foreign_id](auto* r) { r->mutable_region()->set_id(foreign_id); },
       Code::PERMISSION_DENIED},
  };
}

TEST_F(ServiceValidationTest, ExportRegion) {
  const uint64_t foreign_id = ForeignBufferId();
  ASSERT_FALSE(HasFailure());
  v1::ExportRegionRequest base;
  base.mutable_region()->set_name("buf");
  base.set_access(v1::ACCESS_READ_WRITE);
  auto rows =
      RefRows<v1::ExportRegionRequest>(Code::OK, foreign_id);
  std::vector<Row<v1::ExportRegionRequest>> more = {
      {"access out of range",
       [](auto* r) { r->set_access(static_cast<v1::Access>(5)); },
       Code::INVALID_ARGUMENT, "unknown access value 5"},
      {"unnamed region",
       [this](auto* r) { r->mutable_region()->set_id(anonymous_id_); },
       Code::FAILED_PRECONDITION, "has no name"},
      {"allow: a bad address",
       [](auto* r) { r->add_allow()->set_peer("10.0.0.0/40"); },
       Code::INVALID_ARGUMENT, "10.0.0.0/40"},
      {"allow: a host:port",
       [](auto* r) { r->add_allow()->set_peer("10.0.0.1:7471"); },
       Code::INVALID_ARGUMENT},
      {"allow: empty peer", [](auto* r) { r->add_allow()->set_uid(5); },
       Code::INVALID_ARGUMENT},
      {"allow: empty certificate name",
       [](auto* r) { r->add_allow()->set_peer("cert:"); },
       Code::INVALID_ARGUMENT},
      {"allow: 65 entries",
       [](auto* r) {
         for (int i = 0; i < 65; ++i) r->add_allow()->set_peer("*");
       },
       Code::INVALID_ARGUMENT, "at most 64"},
      {"allow: with no access",
       [](auto* r) {
         r->set_access(v1::ACCESS_NONE);
         r->add_allow()->set_peer("*");
       },
       Code::INVALID_ARGUMENT, "no access to grant"},
      {"allow: valid", [](auto* r) { r->add_allow()->set_peer("127.0.0.1"); },
       Code::OK},
  };
  rows.insert(rows.end(), more.begin(), more.end());
  RunTable(&v1::Local::Stub::ExportRegion, base, rows);
}

TEST_F(ServiceValidationTest, GetDescriptorAndFreeRegion) {
  const uint64_t foreign_id = ForeignBufferId();
  ASSERT_FALSE(HasFailure());
  v1::GetDescriptorRequest descriptor;
  descriptor.mutable_region()->set_name("buf");
  auto rows =
      RefRows<v1::GetDescriptorRequest>(Code::OK, foreign_id);
  rows.push_back(
      {"not exported",
       [this](auto* r) { r->mutable_region()->set_id(anonymous_id_); },
       Code::FAILED_PRECONDITION, "is not exported"});
  RunTable(&v1::Local::Stub::GetDescriptor, descriptor, rows);

  v1::FreeRegionRequest free;
  free.mutable_region()->set_id(anonymous_id_);
  auto free_rows =
      RefRows<v1::FreeRegionRequest>(Code::OK, foreign_id);
  // (The valid row freed it: a second time it is gone.)
  free_rows.push_back({"already freed", [](auto*) {}, Code::NOT_FOUND});
  RunTable(&v1::Local::Stub::FreeRegion, free, free_rows);
}

TEST_F(ServiceValidationTest, SessionTokens) {
  v1::ListRegionsRequest request;
  v1::ListRegionsResponse response;
  for (const auto& [token, code] : std::vector<std::pair<std::string, Code>>{
           {"", Code::UNAUTHENTICATED},
           {"0123456789abcdef0123456789abcdef", Code::UNAUTHENTICATED},
           {std::string(2000, 'f'), Code::UNAUTHENTICATED},
       }) {
    grpc::ClientContext context;
    context.AddMetadata("rdmad-session", token);
    EXPECT_EQ(s_->stub().ListRegions(&context, request, &response).error_code(),
              code)
        << token.substr(0, 40);
  }
  // Without a token inspection works; calls acting for a session do not.
  {
    grpc::ClientContext context;
    EXPECT_TRUE(s_->stub().ListRegions(&context, request, &response).ok());
  }
  {
    grpc::ClientContext context;
    v1::AllocateBufferRequest allocate;
    allocate.set_size(4096);
    v1::AllocateBufferResponse allocated;
    EXPECT_EQ(
        s_->stub().AllocateBuffer(&context, allocate, &allocated).error_code(),
        Code::UNAUTHENTICATED);
  }
  // Last (gRPC may drop the connection over it): a token past gRPC's own
  // limit on metadata (8 KiB) is refused by gRPC itself.
  grpc::ClientContext context;
  context.AddMetadata("rdmad-session", std::string(10000, 'f'));
  EXPECT_EQ(s_->stub().ListRegions(&context, request, &response).error_code(),
            Code::RESOURCE_EXHAUSTED);
}

TEST_F(ServiceValidationTest, PeerHello) {
  v1::HelloRequest base;
  base.set_incarnation(1);
  base.set_address("127.0.0.1:7471");
  base.add_transports(v1::TRANSPORT_TCP);
  std::vector<Row<v1::HelloRequest>> rows = {
      {"valid", [](auto*) {}, Code::OK},
      {"empty", [](auto* r) { r->Clear(); }, Code::OK},
      {"transport out of range",
       [](auto* r) { r->add_transports(static_cast<v1::TransportKind>(42)); },
       Code::INVALID_ARGUMENT},
      {"transport unspecified",
       [](auto* r) { r->add_transports(v1::TRANSPORT_UNSPECIFIED); },
       Code::INVALID_ARGUMENT},
      {"GID of 3 bytes", [](auto* r) { r->add_endpoints()->set_gid("abc"); },
       Code::INVALID_ARGUMENT},
  };
  for (const auto& [what, peer] : BadPeers()) {
    rows.push_back({absl::StrCat("address: ", what),
                    [peer = peer](auto* r) { r->set_address(peer); },
                    Code::INVALID_ARGUMENT});
  }
  RunPeerTable(&v1::Peer::Stub::Hello, base, rows);
}

TEST_F(ServiceValidationTest, PeerConnect) {
  v1::ConnectRequest base;
  base.set_incarnation(1);
  base.set_generation(1);
  base.set_transport(v1::TRANSPORT_TCP);
  base.set_address("127.0.0.1:7471");
  std::vector<Row<v1::ConnectRequest>> rows = {
      {"valid", [](auto*) {}, Code::OK},
      {"connections max", [](auto* r) { r->set_tcp_connections(kMax32); },
       Code::OK},
      {"transport missing", [](auto* r) { r->clear_transport(); },
       Code::INVALID_ARGUMENT},
      {"transport out of range",
       [](auto* r) { r->set_transport(static_cast<v1::TransportKind>(99)); },
       Code::INVALID_ARGUMENT, "is not a transport"},
      {"verbs on a node without it",
       [](auto* r) { r->set_transport(v1::TRANSPORT_VERBS); },
       TestTransport() == "tcp" ? Code::UNIMPLEMENTED : Code::INVALID_ARGUMENT},
      {"target incarnation of another run",
       [](auto* r) { r->set_target_incarnation(12345); },
       Code::FAILED_PRECONDITION, "say Hello again"},
  };
  for (const auto& [what, peer] : BadPeers()) {
    rows.push_back({absl::StrCat("address: ", what),
                    [peer = peer](auto* r) { r->set_address(peer); },
                    Code::INVALID_ARGUMENT});
  }
  RunPeerTable(&v1::Peer::Stub::Connect, base, rows);
}

TEST_F(ServiceValidationTest, PeerResolve) {
  v1::ResolveRequest base;
  base.set_name("dst");
  base.set_incarnation(1);
  std::vector<Row<v1::ResolveRequest>> rows = {
      {"valid", [](auto*) {}, Code::OK},
      {"with a uid", [](auto* r) { r->set_uid(kMax32); }, Code::OK},
      {"name missing", [](auto* r) { r->clear_name(); },
       Code::INVALID_ARGUMENT},
      {"name with a space", [](auto* r) { r->set_name("d st"); },
       Code::INVALID_ARGUMENT},
      {"name with a NUL", [](auto* r) { r->set_name(std::string("dst\0", 4)); },
       Code::INVALID_ARGUMENT},
      {"name 10 KB", [](auto* r) { r->set_name(std::string(10000, 'd')); },
       Code::INVALID_ARGUMENT},
      {"name a peer address", [](auto* r) { r->set_name("127.0.0.1:1"); },
       Code::INVALID_ARGUMENT},
      {"name unknown", [](auto* r) { r->set_name("nothere"); },
       Code::NOT_FOUND},
  };
  RunPeerTable(&v1::Peer::Stub::Resolve, base, rows);
}

// A body that is not a serialized message of the method's type.
TEST_F(ServiceValidationTest, BodiesThatDoNotParseAreInvalidArgument) {
  const std::string garbage = "\xff\xff\xff\xff\x0f";
  const std::string local = absl::StrCat("unix:", a_->socket());
  for (const char* method :
       {"/rdmad.v1.Local/GetStatus", "/rdmad.v1.Local/AllocateBuffer",
        "/rdmad.v1.Local/Write", "/rdmad.v1.Local/Batch"}) {
    grpc::Status status = RawCall(local, method, garbage);
    EXPECT_EQ(status.error_code(), Code::INVALID_ARGUMENT)
        << method << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("does not parse"));
  }
  for (const char* method : {"/rdmad.v1.Peer/Hello", "/rdmad.v1.Peer/Resolve",
                             "/rdmad.v1.Peer/Connect"}) {
    grpc::Status status = RawCall(b_->peer_address(), method, garbage);
    EXPECT_EQ(status.error_code(), Code::INVALID_ARGUMENT)
        << method << ": " << status.error_message();
  }
  // A method that does not exist is still UNIMPLEMENTED.
  EXPECT_EQ(RawCall(local, "/rdmad.v1.Local/NoSuchMethod", "").error_code(),
            Code::UNIMPLEMENTED);
  // And an empty body is a valid (empty) message.
  EXPECT_TRUE(RawCall(local, "/rdmad.v1.Local/GetStatus", "").ok());
}

}  // namespace
}  // namespace rdmad::testing
