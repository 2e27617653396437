// PeerService, served in process over in-memory parts (a region table over
// a null registrar, fake acceptors): what each RPC answers to good input,
// and the code and message of each refusal.
#include "daemon/service/peer_service.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/core/memory_registrar.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/region_fixtures.h"
#include "tests/unit/fakes/service_fakes.h"

namespace rdmad::service {
namespace {

using ::testing::HasSubstr;
using testing::FakeAcceptor;
using testing::InProcessServer;

constexpr uint64_t kDaemonIncarnation = 0x5eed;
const core::Caller kOwner{1, 1000, 1000, 11, {}};

class PeerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    identity_.version = "9.8.7";
    identity_.incarnation = kDaemonIncarnation;
    identity_.transport = core::TransportKind::kTcp;
    identity_.peer_listen = "127.0.0.1:7471";
    Allocate("kv", 4096, 0600, core::RemoteAccess::kReadWrite);
    Allocate("logs", 100, 0644, core::RemoteAccess::kRead);
    Allocate("private", 100, 0600, core::RemoteAccess::kNone);
  }

  void Allocate(const char* name, uint64_t size, uint32_t mode,
                core::RemoteAccess access) {
    ASSERT_TRUE(core::testing::AllocateNamed(regions_, kOwner, name, size,
                                             mode, access)
                    .ok())
        << name;
  }

  // Starts the service with the parts as the test left them.
  void Start() {
    service_ = std::make_unique<PeerService>(
        PeerServiceDeps{.identity = &identity_,
                        .devices = &devices_,
                        .peer_allow = &allow_,
                        .regions = &regions_,
                        .tcp_acceptor = &tcp_,
                        .verbs_acceptor = nullptr,
                        .handshakes = nullptr});
    server_ = std::make_unique<InProcessServer>(service_.get());
    stub_ = v1::Peer::NewStub(server_->channel());
  }

  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (v1::Peer::Stub::*method)(
                        grpc::ClientContext*, const Request&, Response*),
                    const Request& request, Response* response) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return (stub_.get()->*method)(&context, request, response);
  }

  DaemonIdentity identity_;
  std::vector<core::DeviceInfo> devices_;
  core::PeerAllowList allow_;
  core::NullRegistrar registrar_;
  core::RegionTable regions_{&registrar_, core::RegionLimits{}};
  FakeAcceptor tcp_{core::TransportKind::kTcp};
  std::unique_ptr<PeerService> service_;
  std::unique_ptr<InProcessServer> server_;
  std::unique_ptr<v1::Peer::Stub> stub_;
};

TEST_F(PeerServiceTest, HelloSaysWhoThisDaemonIsAndWhatItOffers) {
  core::PortInfo port;
  port.port = 1;
  port.link_layer = "Ethernet";
  port.active_mtu = 4096;
  core::GidInfo gid;
  gid.index = 3;
  gid.raw[15] = 1;
  gid.type = "RoCEv2";
  port.gids.push_back(gid);
  devices_.push_back(core::DeviceInfo{.name = "rxe0", .ports = {port}});
  Start();
  v1::HelloRequest request;
  request.set_incarnation(1);
  request.set_address("127.0.0.2:7471");
  request.add_transports(v1::TRANSPORT_TCP);
  v1::HelloResponse response;
  grpc::Status status = Call(&v1::Peer::Stub::Hello, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.version(), "9.8.7");
  EXPECT_EQ(response.incarnation(), kDaemonIncarnation);
  EXPECT_THAT(response.transports(),
              ::testing::ElementsAre(v1::TRANSPORT_TCP));
  ASSERT_EQ(response.endpoints_size(), 1);
  EXPECT_EQ(response.endpoints(0).device(), "rxe0");
  EXPECT_EQ(response.endpoints(0).gid_index(), 3u);
  EXPECT_EQ(response.endpoints(0).gid().size(), 16u);
  EXPECT_FALSE(response.has_connect());
}

TEST_F(PeerServiceTest, HelloRefusesWhatIsNotAHello) {
  Start();
  struct Case {
    const char* what;
    std::function<void(v1::HelloRequest&)> set;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"a bad caller address",
       [](v1::HelloRequest& r) { r.set_address("no port"); },
       "address (the caller's Peer address)"},
      {"an unknown transport",
       [](v1::HelloRequest& r) { r.add_transports(v1::TransportKind(77)); },
       "77 is not a transport"},
      {"an unspecified transport",
       [](v1::HelloRequest& r) {
         r.add_transports(v1::TRANSPORT_UNSPECIFIED);
       },
       "0 is not a transport"},
      {"a short GID",
       [](v1::HelloRequest& r) { r.add_endpoints()->set_gid("abc"); },
       "a GID is 16 bytes, got 3"},
      {"too many proposals",
       [](v1::HelloRequest& r) {
         for (int i = 0; i < 3; ++i) r.add_connect();
       },
       "at most 2 connect proposals"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    v1::HelloRequest request;
    c.set(request);
    v1::HelloResponse response;
    grpc::Status status = Call(&v1::Peer::Stub::Hello, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
  }
}

TEST_F(PeerServiceTest, EveryCallRefusesAPeerOutsidePeerAllow) {
  auto allow = core::PeerAllowList::Parse({"127.0.0.0/8"});
  ASSERT_TRUE(allow.ok());
  allow_ = *allow;
  Start();
  // An in-process call has no IP address: no entry admits it.
  v1::HelloResponse hello;
  v1::ConnectResponse connect;
  v1::ResolveResponse resolve;
  v1::ListExportsResponse list;
  v1::ResolveRequest resolve_request;
  resolve_request.set_name("kv");
  const std::vector<grpc::Status> statuses = {
      Call(&v1::Peer::Stub::Hello, v1::HelloRequest(), &hello),
      Call(&v1::Peer::Stub::Connect, v1::ConnectRequest(), &connect),
      Call(&v1::Peer::Stub::Resolve, resolve_request, &resolve),
      Call(&v1::Peer::Stub::ListExports, v1::ListExportsRequest(), &list),
  };
  for (const grpc::Status& status : statuses) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(status.error_message(),
                HasSubstr("not in this daemon's peer_allow list"));
  }
  EXPECT_EQ(tcp_.accepted(), 0);
}

TEST_F(PeerServiceTest, ConnectGoesToTheTransportsAcceptor) {
  Start();
  v1::ConnectRequest request;
  request.set_transport(v1::TRANSPORT_TCP);
  request.set_target_incarnation(kDaemonIncarnation);
  request.set_generation(42);
  request.set_tcp_connections(2);
  v1::ConnectResponse response;
  grpc::Status status = Call(&v1::Peer::Stub::Connect, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.incarnation(), kDaemonIncarnation);
  EXPECT_EQ(response.generation(), 42u);
  EXPECT_EQ(tcp_.accepted(), 1);
  EXPECT_EQ(tcp_.last_request().tcp_connections(), 2u);
}

TEST_F(PeerServiceTest, ConnectRefusals) {
  Start();
  struct Case {
    const char* what;
    v1::TransportKind transport;
    uint64_t target_incarnation;
    absl::Status acceptor_answer;
    grpc::StatusCode code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"no transport", v1::TRANSPORT_UNSPECIFIED, 0, absl::OkStatus(),
       grpc::StatusCode::INVALID_ARGUMENT, "is not a transport"},
      {"a Hello from an earlier run", v1::TRANSPORT_TCP, kDaemonIncarnation + 1,
       absl::OkStatus(), grpc::StatusCode::FAILED_PRECONDITION,
       "say Hello again"},
      {"a transport this daemon lacks", v1::TRANSPORT_VERBS, 0,
       absl::OkStatus(), grpc::StatusCode::UNIMPLEMENTED,
       "cannot accept TRANSPORT_VERBS connections"},
      {"the acceptor's own refusal", v1::TRANSPORT_TCP, 0,
       absl::ResourceExhaustedError("too many data connections"),
       grpc::StatusCode::RESOURCE_EXHAUSTED, "too many data connections"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    tcp_.set_answer(c.acceptor_answer);
    v1::ConnectRequest request;
    request.set_transport(c.transport);
    request.set_target_incarnation(c.target_incarnation);
    v1::ConnectResponse response;
    grpc::Status status = Call(&v1::Peer::Stub::Connect, request, &response);
    EXPECT_EQ(status.error_code(), c.code);
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
  }
}

TEST_F(PeerServiceTest, HelloAnswersItsProposalsAndNames) {
  Start();
  v1::HelloRequest request;
  request.set_incarnation(7);
  v1::ConnectRequest* proposal = request.add_connect();
  proposal->set_incarnation(7);
  proposal->set_transport(v1::TRANSPORT_TCP);
  request.add_resolve()->set_name("kv");
  request.add_resolve()->set_name("nothing-here");
  v1::HelloResponse response;
  grpc::Status status = Call(&v1::Peer::Stub::Hello, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.connect_transport(), v1::TRANSPORT_TCP);
  EXPECT_EQ(response.connect().incarnation(), kDaemonIncarnation);
  ASSERT_EQ(response.resolved_size(), 2);
  EXPECT_EQ(response.resolved(0).region().name(), "kv");
  EXPECT_EQ(response.resolved(1).status().code(),
            static_cast<int>(absl::StatusCode::kNotFound));

  // A proposal of a transport this daemon does not serve is answered with
  // why, not tried.
  v1::HelloRequest verbs_only;
  verbs_only.add_connect()->set_transport(v1::TRANSPORT_VERBS);
  v1::HelloResponse refused;
  status = Call(&v1::Peer::Stub::Hello, verbs_only, &refused);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(refused.connect_error().code(),
            static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(refused.connect_error().message(),
              HasSubstr("serves none of the proposed transports"));
}

TEST_F(PeerServiceTest, ResolveDescribesAnExport) {
  Start();
  v1::ResolveRequest request;
  request.set_name("kv");
  v1::ResolveResponse response;
  grpc::Status status = Call(&v1::Peer::Stub::Resolve, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.region().name(), "kv");
  EXPECT_EQ(response.region().length(), 4096u);
  EXPECT_EQ(response.region().access(), v1::ACCESS_READ_WRITE);
  EXPECT_EQ(response.region().incarnation(), kDaemonIncarnation);
  EXPECT_NE(response.region().tcp_key(), 0u);
}

TEST_F(PeerServiceTest, ResolveFromThisDaemonItselfGivesNoMoreThanTheMode) {
  Start();
  // The owner keeps the export's access; another uid reads "logs" by its
  // mode 0644 and nothing of "kv" (0600).
  struct Case {
    const char* name;
    uint32_t uid;
    v1::Access access;
  };
  for (const Case& c : {Case{"kv", 1000, v1::ACCESS_READ_WRITE},
                        Case{"logs", 2000, v1::ACCESS_READ}}) {
    SCOPED_TRACE(c.name);
    v1::ResolveRequest request;
    request.set_name(c.name);
    request.set_incarnation(kDaemonIncarnation);
    request.set_uid(c.uid);
    v1::ResolveResponse response;
    grpc::Status status = Call(&v1::Peer::Stub::Resolve, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.region().access(), c.access);
  }
}

TEST_F(PeerServiceTest, ResolveRefusals) {
  Start();
  struct Case {
    const char* what;
    const char* name;
    bool self_route;
    std::optional<uint32_t> uid;
    grpc::StatusCode code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"a bad name", "", false, std::nullopt,
       grpc::StatusCode::INVALID_ARGUMENT, ""},
      {"no such export", "missing", false, std::nullopt,
       grpc::StatusCode::NOT_FOUND, ""},
      {"a region that is not exported", "private", false, std::nullopt,
       grpc::StatusCode::NOT_FOUND, ""},
      {"from itself without a uid", "kv", true, std::nullopt,
       grpc::StatusCode::PERMISSION_DENIED,
       "must carry the local caller's uid"},
      {"from itself for a uid the mode refuses", "kv", true, 2000,
       grpc::StatusCode::PERMISSION_DENIED,
       "uid 2000 may neither read nor write region 'kv'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    v1::ResolveRequest request;
    request.set_name(c.name);
    if (c.self_route) request.set_incarnation(kDaemonIncarnation);
    if (c.uid.has_value()) request.set_uid(*c.uid);
    v1::ResolveResponse response;
    grpc::Status status = Call(&v1::Peer::Stub::Resolve, request, &response);
    EXPECT_EQ(status.error_code(), c.code);
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
    EXPECT_FALSE(response.has_region());
  }
}

TEST_F(PeerServiceTest, ListExportsPagesThroughExportsOnly) {
  Start();
  v1::ListExportsRequest request;
  request.set_page_size(1);
  std::vector<std::string> names;
  for (int page = 0; page < 5; ++page) {
    v1::ListExportsResponse response;
    grpc::Status status =
        Call(&v1::Peer::Stub::ListExports, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    for (const v1::ExportedRegion& r : response.regions()) {
      names.push_back(r.name());
    }
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  EXPECT_THAT(names, ::testing::ElementsAre("kv", "logs"));

  request.set_page_token("not a name!");
  v1::ListExportsResponse response;
  grpc::Status status = Call(&v1::Peer::Stub::ListExports, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace rdmad::service
