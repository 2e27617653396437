// LocalService, served in process over in-memory tables and fakes
// (local_service_fixture.h): the binding of calls to sessions, the daemon's
// description, and the calls that manage this daemon's regions — what each
// answers to good input, and the code of each refusal. Regions described
// from elsewhere are in local_service_stat_test.cc, the data calls in
// local_service_data_test.cc.
#include "daemon/service/local_service.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "daemon/peer/descriptor_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/local_service_fixture.h"

namespace rdmad::service {
namespace {

using ::testing::HasSubstr;
using testing::kIncarnation;
using testing::LocalServiceTest;
using Stub = v1::Local::Stub;

// A memfd of `size` bytes, sealed against shrinking as the daemon asks.
UniqueFd Memfd(uint64_t size) {
  UniqueFd fd(
      ::memfd_create("local_service_test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (fd.valid() && (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0 ||
                     ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0)) {
    fd.reset();
  }
  return fd;
}

v1::RegionRef RefByName(const std::string& name) {
  v1::RegionRef ref;
  ref.set_name(name);
  return ref;
}

TEST_F(LocalServiceTest, CallWithoutSessionIsUnauthenticated) {
  Start();
  v1::AllocateBufferRequest request;
  request.set_size(4096);
  v1::AllocateBufferResponse response;
  grpc::Status status =
      Call(&Stub::AllocateBuffer, nullptr, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(status.error_message(), HasSubstr("rdmad-session"));
}

TEST_F(LocalServiceTest, TokenIsGoodOnlyInTheProcessItWasIssuedTo) {
  Start();
  const Client client = Open(1000, 100);
  v1::AllocateBufferRequest request;
  request.set_size(4096);
  v1::AllocateBufferResponse response;
  // Another process of another uid, holding the same token.
  ConnectAs(200, 1001);
  EXPECT_EQ(CodeOf(&Stub::AllocateBuffer, &client, request),
            grpc::StatusCode::PERMISSION_DENIED);
  // Another process of the same uid.
  ConnectAs(201, 1000);
  EXPECT_EQ(CodeOf(&Stub::AllocateBuffer, &client, request),
            grpc::StatusCode::PERMISSION_DENIED);
  // A connection the listener does not know: its error, as it is.
  ConnectionUnknown(absl::UnavailableError("connection gone"));
  EXPECT_EQ(CodeOf(&Stub::AllocateBuffer, &client, request),
            grpc::StatusCode::UNAVAILABLE);
  ConnectAs(100, 1000);
  EXPECT_TRUE(Call(&Stub::AllocateBuffer, &client, request, &response).ok());
}

TEST_F(LocalServiceTest, InspectionNeedsNoSessionButRefusesABadToken) {
  Start();
  v1::GetStatusResponse response;
  EXPECT_TRUE(
      Call(&Stub::GetStatus, nullptr, v1::GetStatusRequest(), &response).ok());
  const Client stranger{.pid = 1, .uid = 1000, .token = "not-a-token"};
  ConnectAs(1, 1000);
  EXPECT_EQ(CodeOf(&Stub::GetStatus, &stranger, v1::GetStatusRequest()),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(CodeOf(&Stub::ListPeers, &stranger, v1::ListPeersRequest()),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(LocalServiceTest, GetStatusDescribesTheDaemon) {
  metrics_.Set("127.0.0.1:9464");
  devices_.push_back(core::DeviceInfo{.name = "rxe0", .dmabuf = true});
  peers_.peers.resize(2);
  StartWithAll();
  const Client client = Open(1000);
  Allocate(CallerOf(client), "kv", 4096, 0600);
  v1::GetStatusResponse response;
  ASSERT_TRUE(
      Call(&Stub::GetStatus, &client, v1::GetStatusRequest(), &response).ok());
  EXPECT_EQ(response.version(), "9.8.7");
  EXPECT_EQ(response.incarnation(), kIncarnation);
  EXPECT_EQ(response.transport(), v1::TRANSPORT_TCP);
  EXPECT_EQ(response.peer_listen(), testing::kSelfAddress);
  EXPECT_EQ(response.device_count(), 1u);
  EXPECT_EQ(response.region_count(), 1u);
  EXPECT_EQ(response.region_bytes(), 4096u);
  EXPECT_EQ(response.session_count(), 1u);
  EXPECT_EQ(response.peer_count(), 2u);
  EXPECT_GE(response.uptime_ms(), 5000u);
  EXPECT_EQ(response.max_pinned_bytes(), limits_.max_pinned_bytes);
  EXPECT_EQ(response.metrics_url(), "http://127.0.0.1:9464/metrics");
  EXPECT_THAT(response.dmabuf_devices(), ::testing::ElementsAre("rxe0"));
  EXPECT_TRUE(response.has_directory());
}

TEST_F(LocalServiceTest, ListDevicesSaysWhenThereAreNone) {
  Start();
  v1::ListDevicesResponse none;
  ASSERT_TRUE(
      Call(&Stub::ListDevices, nullptr, v1::ListDevicesRequest(), &none).ok());
  EXPECT_EQ(none.devices_size(), 0);
  EXPECT_THAT(none.note(), HasSubstr("TCP transport"));
  devices_.push_back(core::DeviceInfo{.name = "rxe0"});
  v1::ListDevicesResponse one;
  ASSERT_TRUE(
      Call(&Stub::ListDevices, nullptr, v1::ListDevicesRequest(), &one).ok());
  ASSERT_EQ(one.devices_size(), 1);
  EXPECT_EQ(one.devices(0).name(), "rxe0");
  EXPECT_TRUE(one.note().empty());
}

TEST_F(LocalServiceTest, ListDevicesShowsEachDevicesNoticeReceiveQueue) {
  testing::FakeAcceptor verbs(core::TransportKind::kVerbs);
  verbs.set_notice_queues({{.device = "mlx5_1", .depth = 1024, .posted = 1000,
                            .reposts = 77}});
  deps_.verbs_acceptor = &verbs;
  devices_.push_back(core::DeviceInfo{.name = "mlx5_0"});
  devices_.push_back(core::DeviceInfo{.name = "mlx5_1"});
  Start();
  v1::ListDevicesResponse response;
  ASSERT_TRUE(Call(&Stub::ListDevices, nullptr, v1::ListDevicesRequest(),
                   &response)
                  .ok());
  ASSERT_EQ(response.devices_size(), 2);
  EXPECT_FALSE(response.devices(0).has_notice_receives())
      << "a device without a shared receive queue shows none";
  ASSERT_TRUE(response.devices(1).has_notice_receives());
  EXPECT_EQ(response.devices(1).notice_receives().depth(), 1024u);
  EXPECT_EQ(response.devices(1).notice_receives().posted(), 1000u);
  EXPECT_EQ(response.devices(1).notice_receives().reposts(), 77u);
  // Read at each call: the counts move as notices come and go.
  verbs.set_notice_queues({{.device = "mlx5_1", .depth = 1024, .posted = 1024,
                            .reposts = 101}});
  ASSERT_TRUE(Call(&Stub::ListDevices, nullptr, v1::ListDevicesRequest(),
                   &response)
                  .ok());
  EXPECT_EQ(response.devices(1).notice_receives().posted(), 1024u);
  EXPECT_EQ(response.devices(1).notice_receives().reposts(), 101u);
}

TEST_F(LocalServiceTest, AllocateBufferMakesARegionWithinTheLimits) {
  Start();
  const Client client = Open(1000);
  v1::AllocateBufferRequest request;
  request.set_size(8192);
  request.set_name("kv");
  request.set_daemon_owned(true);
  request.set_mode(0640);
  v1::AllocateBufferResponse response;
  ASSERT_TRUE(Call(&Stub::AllocateBuffer, &client, request, &response).ok());
  EXPECT_EQ(response.region().name(), "kv");
  EXPECT_EQ(response.region().size(), 8192u);
  EXPECT_EQ(response.region().mode(), 0640u);
  EXPECT_EQ(response.region().owner(), v1::REGION_OWNER_DAEMON);
  EXPECT_NE(core::testing::FindNamed(regions_, "kv"), nullptr);

  request.set_name("big");
  request.set_size(limits_.max_pinned_bytes + 1);
  EXPECT_EQ(CodeOf(&Stub::AllocateBuffer, &client, request),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  request.set_size(4096);
  request.set_export_access(static_cast<v1::Access>(99));
  EXPECT_EQ(CodeOf(&Stub::AllocateBuffer, &client, request),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(LocalServiceTest, ExportWhoseNameTheClusterRefusesLeavesNothing) {
  directory_.claim = absl::AlreadyExistsError("another daemon holds 'kv'");
  StartWithAll();
  const Client client = Open(1000);
  v1::AllocateBufferRequest request;
  request.set_size(4096);
  request.set_name("kv");
  request.set_daemon_owned(true);
  request.set_export_access(v1::ACCESS_READ);
  EXPECT_EQ(CodeOf(&Stub::AllocateBuffer, &client, request),
            grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(directory_.asked_name, "kv");
  EXPECT_EQ(core::testing::FindNamed(regions_, "kv"), nullptr);
}

TEST_F(LocalServiceTest, RegisterBufferChecksTheRequestBeforeTakingTheFd) {
  Start();
  const Client client = Open(1000);
  Pass(client, 7, Memfd(4096));
  v1::RegisterBufferRequest request;
  request.set_size(4096);
  v1::RegisterBufferResponse response;
  struct Case {
    const char* what;
    uint64_t token;
    uint64_t size;
    v1::Access access;
    grpc::StatusCode code;
  };
  for (const Case& c : {
           Case{"no token", 0, 4096, v1::ACCESS_NONE,
                grpc::StatusCode::INVALID_ARGUMENT},
           Case{"no size", 7, 0, v1::ACCESS_NONE,
                grpc::StatusCode::INVALID_ARGUMENT},
           Case{"an export with no name", 7, 4096, v1::ACCESS_READ,
                grpc::StatusCode::INVALID_ARGUMENT},
           Case{"a token never passed", 8, 4096, v1::ACCESS_NONE,
                grpc::StatusCode::NOT_FOUND},
       }) {
    request.set_fd_token(c.token);
    request.set_size(c.size);
    request.set_export_access(c.access);
    EXPECT_EQ(CodeOf(&Stub::RegisterBuffer, &client, request), c.code)
        << c.what;
  }
  // None of those took the descriptor.
  request.set_fd_token(7);
  request.set_size(4096);
  request.set_export_access(v1::ACCESS_NONE);
  grpc::Status status =
      Call(&Stub::RegisterBuffer, &client, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.region().size(), 4096u);
  EXPECT_EQ(response.region().owner(), v1::REGION_OWNER_SESSION);
  EXPECT_EQ(response.region().session_id(), client.session_id);
}

TEST_F(LocalServiceTest, FreeRegionNeedsARegionTheCallerManages) {
  Start();
  const auto [owner, other] = OwnerAndOther();
  v1::FreeRegionRequest request;
  v1::FreeRegionResponse response;
  EXPECT_EQ(CodeOf(&Stub::FreeRegion, &other, request),
            grpc::StatusCode::INVALID_ARGUMENT);
  *request.mutable_region() = RefByName("nothing");
  EXPECT_EQ(CodeOf(&Stub::FreeRegion, &other, request),
            grpc::StatusCode::NOT_FOUND);
  *request.mutable_region() = RefByName("kv");
  EXPECT_EQ(CodeOf(&Stub::FreeRegion, &other, request),
            grpc::StatusCode::PERMISSION_DENIED);
  ConnectAs(owner.pid, owner.uid);
  EXPECT_TRUE(Call(&Stub::FreeRegion, &owner, request, &response).ok());
  EXPECT_EQ(core::testing::FindNamed(regions_, "kv"), nullptr);
}

TEST_F(LocalServiceTest, ExportRegionRefusesAnUnknownAccess) {
  Start();
  const Client client = Open(1000);
  Allocate(CallerOf(client), "kv", 4096, 0600);
  v1::ExportRegionRequest request;
  *request.mutable_region() = RefByName("kv");
  request.set_access(static_cast<v1::Access>(42));
  v1::ExportRegionResponse response;
  grpc::Status status = Call(&Stub::ExportRegion, &client, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown access value 42"));
  request.set_access(v1::ACCESS_READ_WRITE);
  ASSERT_TRUE(Call(&Stub::ExportRegion, &client, request, &response).ok());
  EXPECT_EQ(response.region().export_access(), v1::ACCESS_READ_WRITE);
}

TEST_F(LocalServiceTest, DescriptorGoesOnlyToWhoMayDoWhatItGrants) {
  Start();
  const Client owner = Open(1000, 100);
  Allocate(CallerOf(owner), "kv", 4096, 0644, core::RemoteAccess::kReadWrite);
  Allocate(CallerOf(owner), "private", 4096, 0644);
  const Client reader = Open(1001, 101);
  v1::GetDescriptorRequest request;
  *request.mutable_region() = RefByName("kv");
  v1::GetDescriptorResponse response;
  grpc::Status status = Call(&Stub::GetDescriptor, &reader, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("remote write"));
  ConnectAs(owner.pid, owner.uid);
  *request.mutable_region() = RefByName("private");
  EXPECT_EQ(CodeOf(&Stub::GetDescriptor, &owner, request),
            grpc::StatusCode::FAILED_PRECONDITION);
  *request.mutable_region() = RefByName("kv");
  ASSERT_TRUE(Call(&Stub::GetDescriptor, &owner, request, &response).ok());
  EXPECT_EQ(response.region().incarnation(), kIncarnation);
  EXPECT_EQ(response.region().name(), "kv");
  auto decoded = peer::DecodeDescriptor(response.encoded());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->region_id(), response.region().region_id());
}

TEST_F(LocalServiceTest, SetRegionPermissionsIsTheOwnersToDo) {
  Start();
  const auto [owner, other] = OwnerAndOther();
  v1::SetRegionPermissionsRequest request;
  *request.mutable_region() = RefByName("kv");
  request.set_mode(0600);
  v1::SetRegionPermissionsResponse response;
  EXPECT_EQ(CodeOf(&Stub::SetRegionPermissions, &other, request),
            grpc::StatusCode::PERMISSION_DENIED);
  ConnectAs(owner.pid, owner.uid);
  ASSERT_TRUE(
      Call(&Stub::SetRegionPermissions, &owner, request, &response).ok());
  EXPECT_EQ(response.region().mode(), 0600u);
}

TEST_F(LocalServiceTest, ListRegionsByNameAndByPage) {
  Start();
  const Client client = Open(1000);
  for (const char* name : {"a", "b", "c"}) {
    Allocate(CallerOf(client), name, 4096, 0600);
  }
  v1::ListRegionsRequest request;
  request.set_name("b");
  v1::ListRegionsResponse response;
  ASSERT_TRUE(Call(&Stub::ListRegions, nullptr, request, &response).ok());
  ASSERT_EQ(response.regions_size(), 1);
  EXPECT_EQ(response.regions(0).name(), "b");

  request.clear_name();
  request.set_page_size(2);
  v1::ListRegionsResponse first;
  ASSERT_TRUE(Call(&Stub::ListRegions, nullptr, request, &first).ok());
  ASSERT_EQ(first.regions_size(), 2);
  ASSERT_FALSE(first.next_page_token().empty());
  request.set_page_token(first.next_page_token());
  v1::ListRegionsResponse second;
  ASSERT_TRUE(Call(&Stub::ListRegions, nullptr, request, &second).ok());
  ASSERT_EQ(second.regions_size(), 1);
  EXPECT_EQ(second.regions(0).name(), "c");
  EXPECT_TRUE(second.next_page_token().empty());

  request.set_page_token("not a token");
  EXPECT_EQ(CodeOf(&Stub::ListRegions, nullptr, request),
            grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace rdmad::service
