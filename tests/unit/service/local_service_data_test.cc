// LocalService's data calls, served in process over in-memory tables and
// fakes (local_service_fixture.h): transfers over gRPC (Write, Read,
// Batch), client queues, remote handles — OpenRemote on each route
// core::GrantTarget gives — and the peer listings.
#include <cstring>
#include <string>

#include "daemon/service/local_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/local_service_fixture.h"

namespace rdmad::service {
namespace {

using ::testing::HasSubstr;
using testing::kOtherPeer;
using testing::LocalServiceTest;
using Stub = v1::Local::Stub;

v1::TransferOp LocalCopy(const std::string& from, const std::string& to,
                         uint64_t length) {
  v1::TransferOp op;
  op.mutable_local()->set_name(from);
  op.mutable_remote()->set_name(to);
  op.set_length(length);
  return op;
}

TEST_F(LocalServiceTest, WriteAndReadMoveBytesBetweenRegionsHere) {
  Start();
  const Client client = Open(1000);
  Allocate(CallerOf(client), "src", 4096, 0600);
  Allocate(CallerOf(client), "dst", 4096, 0600);
  std::memcpy(core::testing::FindNamed(regions_, "src")->data(), "hello", 5);
  v1::TransferRequest request;
  *request.mutable_op() = LocalCopy("src", "dst", 5);
  v1::TransferResponse response;
  grpc::Status status = Call(&Stub::Write, &client, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.bytes(), 5u);
  EXPECT_EQ(response.transport(), v1::TRANSPORT_UNSPECIFIED);
  EXPECT_EQ(std::string(core::testing::FindNamed(regions_, "dst")->data(), 5),
            "hello");

  // Read: from the remote region into the local one.
  *request.mutable_op() = LocalCopy("src", "dst", 5);
  std::memcpy(core::testing::FindNamed(regions_, "dst")->data(), "world", 5);
  ASSERT_TRUE(Call(&Stub::Read, &client, request, &response).ok());
  EXPECT_EQ(std::string(core::testing::FindNamed(regions_, "src")->data(), 5),
            "world");

  request.mutable_op()->set_length(0);
  EXPECT_EQ(CodeOf(&Stub::Write, &client, request),
            grpc::StatusCode::INVALID_ARGUMENT);
  *request.mutable_op() = LocalCopy("src", "missing", 5);
  EXPECT_EQ(CodeOf(&Stub::Write, &client, request),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(LocalServiceTest, BatchReportsEachOperationAndTheBytesMoved) {
  Start();
  const Client client = Open(1000);
  Allocate(CallerOf(client), "src", 4096, 0600);
  Allocate(CallerOf(client), "dst", 4096, 0600);
  v1::BatchRequest request;
  *request.add_ops() = LocalCopy("src", "dst", 100);
  request.mutable_ops(0)->set_op(v1::OP_WRITE);
  *request.add_ops() = LocalCopy("src", "dst", 200);
  request.mutable_ops(1)->set_op(v1::OP_READ);
  *request.add_ops() = LocalCopy("src", "dst", 300);  // no op
  *request.add_ops() = LocalCopy("src", "missing", 400);
  request.mutable_ops(3)->set_op(v1::OP_WRITE);
  v1::BatchResponse response;
  ASSERT_TRUE(Call(&Stub::Batch, &client, request, &response).ok());
  ASSERT_EQ(response.results_size(), 4);
  EXPECT_EQ(response.results(0).code(), 0);
  EXPECT_EQ(response.results(1).code(), 0);
  EXPECT_EQ(response.results(2).code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(response.results(3).code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(response.bytes(), 300u);

  v1::BatchRequest too_many;
  for (int i = 0; i < 4097; ++i) *too_many.add_ops() = request.ops(0);
  grpc::Status status = Call(&Stub::Batch, &client, too_many, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("at most 4096"));
}

TEST_F(LocalServiceTest, OpenQueueFillsInDefaultsAndBoundsTheRings) {
  queues_.opened =
      ring::OpenedQueue{.id = 3,
                        .geometry = {.sq_entries = 256, .cq_entries = 512},
                        .segment_size = 65536};
  StartWithAll();
  const Client client = Open(1000);
  v1::OpenQueueRequest request;
  v1::OpenQueueResponse response;
  ASSERT_TRUE(Call(&Stub::OpenQueue, &client, request, &response).ok());
  EXPECT_EQ(response.queue_id(), 3u);
  EXPECT_EQ(response.submission_entries(), 256u);
  EXPECT_EQ(response.completion_entries(), 512u);
  EXPECT_EQ(response.segment_size(), 65536u);
  EXPECT_EQ(queues_.asked_options().submission_entries, 256u);
  EXPECT_EQ(queues_.asked_options().completion_entries, 512u);
  EXPECT_EQ(queues_.asked_options().default_timeout, absl::Seconds(30));

  request.set_submission_entries(64);
  request.set_default_timeout_ms(24 * 3600 * 1000);
  ASSERT_TRUE(Call(&Stub::OpenQueue, &client, request, &response).ok());
  EXPECT_EQ(queues_.asked_options().completion_entries, 128u);
  EXPECT_EQ(queues_.asked_options().default_timeout, absl::Hours(1));

  request.set_completion_entries(queue::kMaxEntries + 1);
  EXPECT_EQ(CodeOf(&Stub::OpenQueue, &client, request),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.set_completion_entries(0);
  queues_.opened = absl::ResourceExhaustedError("64 queues already");
  EXPECT_EQ(CodeOf(&Stub::OpenQueue, &client, request),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(LocalServiceTest, WithoutQueuesTheQueueCallsSaySo) {
  Start();
  const Client client = Open(1000);
  EXPECT_EQ(CodeOf(&Stub::OpenQueue, &client, v1::OpenQueueRequest()),
            grpc::StatusCode::UNIMPLEMENTED);
  v1::OpenRemoteRequest remote;
  remote.mutable_remote()->set_name("kv");
  EXPECT_EQ(CodeOf(&Stub::OpenRemote, &client, remote),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(CodeOf(&Stub::CloseQueue, &client, v1::CloseQueueRequest()),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(LocalServiceTest, CloseQueueAndListQueuesAreTheCallersOwn) {
  ring::QueueSnapshot mine;
  mine.id = 1;
  mine.caller = core::Caller{.session_id = 1, .uid = 1000, .pid = 100};
  ring::QueueSnapshot theirs = mine;
  theirs.id = 2;
  theirs.caller.uid = 1001;
  queues_.listed = {mine, theirs};
  queues_.open_ids = {1};
  StartWithAll();
  const Client client = Open(1000, 100);
  v1::ListQueuesResponse listed;
  ASSERT_TRUE(
      Call(&Stub::ListQueues, &client, v1::ListQueuesRequest(), &listed).ok());
  ASSERT_EQ(listed.queues_size(), 1);
  EXPECT_EQ(listed.queues(0).queue_id(), 1u);
  EXPECT_EQ(listed.queues(0).uid(), 1000u);
  const Client root = Open(0, 1);
  ASSERT_TRUE(
      Call(&Stub::ListQueues, &root, v1::ListQueuesRequest(), &listed).ok());
  EXPECT_EQ(listed.queues_size(), 2);

  ConnectAs(client.pid, client.uid);
  v1::CloseQueueRequest close;
  close.set_queue_id(1);
  v1::CloseQueueResponse closed;
  EXPECT_TRUE(Call(&Stub::CloseQueue, &client, close, &closed).ok());
  EXPECT_EQ(CodeOf(&Stub::CloseQueue, &client, close),
            grpc::StatusCode::NOT_FOUND);
}

class OpenRemoteTest : public LocalServiceTest {
 protected:
  void SetUp() override {
    StartWithAll();
    client_ = Open(1000);
    Allocate(CallerOf(client_), "kv", 4096, 0640, core::RemoteAccess::kRead);
  }

  grpc::Status OpenRemote(const v1::RemoteRegion& remote,
                          v1::OpenRemoteResponse* response) {
    v1::OpenRemoteRequest request;
    *request.mutable_remote() = remote;
    return Call(&Stub::OpenRemote, &client_, request, response);
  }
  static v1::RemoteRegion Named(const std::string& name,
                                const std::string& peer = "") {
    v1::RemoteRegion remote;
    remote.set_name(name);
    remote.set_peer(peer);
    return remote;
  }

  Client client_;
};

TEST_F(OpenRemoteTest, ANameHereIsServedHereWithTheCallersPermissions) {
  v1::OpenRemoteResponse response;
  ASSERT_TRUE(OpenRemote(Named("kv"), &response).ok());
  EXPECT_EQ(response.size(), 4096u);
  EXPECT_EQ(response.access(), v1::ACCESS_READ_WRITE);
  EXPECT_EQ(response.transport(), v1::TRANSPORT_UNSPECIFIED);
  EXPECT_EQ(response.name(), "kv");
  EXPECT_TRUE(response.peer().empty());
  auto handle = queues_.Handle(client_.session_id, response.handle());
  ASSERT_NE(handle, nullptr);
  EXPECT_EQ(handle->target.name, "kv");
  EXPECT_EQ(peers_.resolves(), 0);

  // Another uid may only read it (mode 0640, other group).
  const Client reader = Open(1001, 7);
  Allocate(CallerOf(client_), "open", 4096, 0644);
  v1::OpenRemoteRequest request;
  *request.mutable_remote() = Named("open");
  ASSERT_TRUE(Call(&Stub::OpenRemote, &reader, request, &response).ok());
  EXPECT_EQ(response.access(), v1::ACCESS_READ);
  *request.mutable_remote() = Named("kv");
  EXPECT_EQ(CodeOf(&Stub::OpenRemote, &reader, request),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(OpenRemoteTest, ADescriptorOfThisDaemonIsServedHere) {
  v1::GetDescriptorRequest ask;
  ask.mutable_region()->set_name("kv");
  v1::GetDescriptorResponse descriptor;
  ASSERT_TRUE(Call(&Stub::GetDescriptor, &client_, ask, &descriptor).ok());
  v1::RemoteRegion remote;
  remote.set_encoded_descriptor(descriptor.encoded());
  v1::OpenRemoteResponse response;
  ASSERT_TRUE(OpenRemote(remote, &response).ok());
  EXPECT_EQ(response.transport(), v1::TRANSPORT_UNSPECIFIED);
  // What the export grants, no more.
  EXPECT_EQ(response.access(), v1::ACCESS_READ);
  auto handle = queues_.Handle(client_.session_id, response.handle());
  ASSERT_NE(handle, nullptr);
  EXPECT_NE(handle->target.self_region_id, 0u);
  EXPECT_TRUE(handle->target.peer.empty());
  EXPECT_EQ(peers_.resolves(), 0);
}

TEST_F(OpenRemoteTest, ANameNotHereGoesThroughTheDirectory) {
  InTheCluster("elsewhere", 512, core::RemoteAccess::kWrite);
  v1::OpenRemoteResponse response;
  ASSERT_TRUE(OpenRemote(Named("elsewhere"), &response).ok());
  EXPECT_EQ(directory_.asked_name, "elsewhere");
  EXPECT_EQ(response.size(), 512u);
  EXPECT_EQ(response.access(), v1::ACCESS_WRITE);
  // Each operation finds the holder again: the handle keeps the name.
  EXPECT_EQ(response.transport(), v1::TRANSPORT_UNSPECIFIED);
  EXPECT_EQ(response.name(), "elsewhere");
  EXPECT_EQ(peers_.resolves(), 0);
  directory_.entry = absl::NotFoundError("no region 'gone' in the cluster");
  EXPECT_EQ(OpenRemote(Named("gone"), &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(OpenRemoteTest, APeersRegionIsResolvedByThePeerLayer) {
  auto region = std::make_shared<core::RemoteRegionInfo>();
  region->length = 8192;
  region->access = core::RemoteAccess::kReadWrite;
  peers_.resolved = peer::TransferFlow::Resolved{
      .region = region, .transport = core::TransportKind::kTcp};
  v1::OpenRemoteResponse response;
  ASSERT_TRUE(OpenRemote(Named("remote", kOtherPeer), &response).ok());
  EXPECT_EQ(peers_.asked_target().peer, kOtherPeer);
  EXPECT_EQ(peers_.asked_target().name, "remote");
  EXPECT_EQ(peers_.asked_uid(), 1000u);
  EXPECT_EQ(response.size(), 8192u);
  EXPECT_EQ(response.access(), v1::ACCESS_READ_WRITE);
  EXPECT_EQ(response.transport(), v1::TRANSPORT_TCP);
  EXPECT_EQ(response.peer(), kOtherPeer);
  peers_.resolved = absl::PermissionDeniedError("not exported to uid 1000");
  EXPECT_EQ(OpenRemote(Named("remote", kOtherPeer), &response).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(OpenRemote(Named("bad name!", kOtherPeer), &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(LocalServiceTest, OpenRemoteToAPeerNeedsADataTransport) {
  deps_.queues = &queues_;  // queues, but no peer layer and no directory
  Start();
  const Client client = Open(1000);
  v1::OpenRemoteRequest request;
  request.mutable_remote()->set_name("remote");
  request.mutable_remote()->set_peer(kOtherPeer);
  EXPECT_EQ(CodeOf(&Stub::OpenRemote, &client, request),
            grpc::StatusCode::FAILED_PRECONDITION);
  // Without a directory, a name that is not here is not found.
  request.mutable_remote()->clear_peer();
  EXPECT_EQ(CodeOf(&Stub::OpenRemote, &client, request),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(OpenRemoteTest, CloseRemoteForgetsTheHandle) {
  v1::OpenRemoteResponse opened;
  ASSERT_TRUE(OpenRemote(Named("kv"), &opened).ok());
  v1::CloseRemoteRequest request;
  request.set_handle(opened.handle());
  v1::CloseRemoteResponse response;
  EXPECT_TRUE(Call(&Stub::CloseRemote, &client_, request, &response).ok());
  EXPECT_EQ(queues_.Handle(client_.session_id, opened.handle()), nullptr);
  EXPECT_EQ(CodeOf(&Stub::CloseRemote, &client_, request),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(LocalServiceTest, ListPeersAndListQpsShowThePeerLayer) {
  peer::PeerSnapshot ready;
  ready.address = kOtherPeer;
  ready.transport = core::TransportKind::kTcp;
  ready.state = peer::PeerState::kReady;
  ready.channel_state = transport::ChannelState::kReady;
  ready.bytes_written = 10;
  peers_.peers = {ready};
  peer::ConnectionSnapshot connection;
  connection.peer = kOtherPeer;
  connection.transport = core::TransportKind::kTcp;
  connection.connection.index = 2;
  peers_.connections = {connection};
  StartWithAll();
  v1::ListPeersResponse peers;
  ASSERT_TRUE(
      Call(&Stub::ListPeers, nullptr, v1::ListPeersRequest(), &peers).ok());
  ASSERT_EQ(peers.peers_size(), 1);
  EXPECT_EQ(peers.peers(0).address(), kOtherPeer);
  EXPECT_EQ(peers.peers(0).transport(), v1::TRANSPORT_TCP);
  EXPECT_EQ(peers.peers(0).state(),
            transport::ChannelStateName(transport::ChannelState::kReady));
  EXPECT_EQ(peers.peers(0).bytes_written(), 10u);
  v1::ListQpsResponse qps;
  ASSERT_TRUE(Call(&Stub::ListQps, nullptr, v1::ListQpsRequest(), &qps).ok());
  ASSERT_EQ(qps.qps_size(), 1);
  EXPECT_EQ(qps.qps(0).peer(), kOtherPeer);
  EXPECT_EQ(qps.qps(0).role(), "initiator");
  // TCP has no QPN: the connection's index stands in.
  EXPECT_EQ(qps.qps(0).local_qpn(), 2u);
}

}  // namespace
}  // namespace rdmad::service
