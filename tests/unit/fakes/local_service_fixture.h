// The Local service served in process over in-memory parts (session and
// region tables, a transfer engine with no peer layer) and fakes (queues,
// peers, the directory, other daemons), with sessions whose calls the
// "kernel" attributes to the process a test says. Shared by the Local
// service's unit tests.
#ifndef RDMAD_TESTS_UNIT_FAKES_LOCAL_SERVICE_FIXTURE_H_
#define RDMAD_TESTS_UNIT_FAKES_LOCAL_SERVICE_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/session_wire.h"
#include "daemon/core/memory_registrar.h"
#include "daemon/core/region_table.h"
#include "daemon/core/session_table.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/service/local_service.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/directory_fake.h"
#include "tests/unit/fakes/local_service_fakes.h"
#include "tests/unit/fakes/region_fixtures.h"
#include "tests/unit/fakes/service_fakes.h"

namespace rdmad::service::testing {

inline constexpr uint64_t kIncarnation = 0x5eed;
inline constexpr char kSelfAddress[] = "127.0.0.1:7471";
inline constexpr char kOtherPeer[] = "127.0.0.2:7471";

class LocalServiceTest : public ::testing::Test {
 protected:
  // A process with a session: what the kernel says of it, and its token.
  struct Client {
    int32_t pid = 0;
    uint32_t uid = 0;
    uint64_t session_id = 0;
    std::string token;
  };

  LocalServiceTest() {
    identity_.version = "9.8.7";
    identity_.incarnation = kIncarnation;
    identity_.transport = core::TransportKind::kTcp;
    identity_.peer_listen = kSelfAddress;
    identity_.local_socket = "/run/rdmad.sock";
    identity_.started = absl::Now() - absl::Seconds(5);
  }

  // Starts the service with the parts as the test left them: what is null
  // in `deps_` is absent (no queues, peers, directory...).
  void Start() {
    deps_.identity = &identity_;
    deps_.metrics_address = &metrics_;
    deps_.devices = &devices_;
    deps_.sessions = &sessions_;
    deps_.credentials_of = [this](absl::string_view)
        -> absl::StatusOr<local_socket::ConnectionCredentials> {
      absl::MutexLock lock(&mu_);
      if (!connection_.ok()) return connection_.status();
      return *connection_;
    };
    deps_.take_passed_fd = [this](uint64_t session_id,
                                  uint64_t token) -> absl::StatusOr<UniqueFd> {
      absl::MutexLock lock(&mu_);
      if (token != passed_token_ || session_id != passed_session_ ||
          !passed_fd_.valid()) {
        return absl::NotFoundError("no descriptor passed under that token");
      }
      return std::move(passed_fd_);
    };
    deps_.regions = &regions_;
    deps_.transfers = &transfers_;
    deps_.inspector = &inspection_;
    service_ = std::make_unique<LocalService>(deps_);
    server_ = std::make_unique<InProcessServer>(service_.get());
    stub_ = v1::Local::NewStub(server_->channel());
  }
  // Start with queues, peers and a directory.
  void StartWithAll() {
    deps_.queues = &queues_;
    deps_.peers = &peers_;
    deps_.directory = &directory_;
    Start();
  }

  // A session of process `pid` of `uid`, whose calls the kernel attributes
  // to that process from now on.
  Client Open(uint32_t uid, int32_t pid = 4242) {
    const core::SessionTable::Opened opened = sessions_.Open(uid, uid, pid);
    ConnectAs(pid, uid);
    return Client{pid, uid, opened.id, opened.token};
  }
  // Sessions of two uids, `owner` (1000) and `other` (1001), and "kv", a
  // region of `owner` that both may use (mode 0666). Calls come from
  // `other`'s process.
  struct TwoUsers {
    Client owner;
    Client other;
  };
  TwoUsers OwnerAndOther() {
    TwoUsers users;
    users.owner = Open(1000, 100);
    Allocate(CallerOf(users.owner), "kv", 4096, 0666);
    users.other = Open(1001, 101);
    return users;
  }
  // What the kernel reports of the calling process from now on.
  void ConnectAs(int32_t pid, uint32_t uid) {
    absl::MutexLock lock(&mu_);
    connection_ = local_socket::ConnectionCredentials{pid, uid, uid};
  }
  void ConnectionUnknown(absl::Status why) {
    absl::MutexLock lock(&mu_);
    connection_ = std::move(why);
  }
  // A descriptor `client` passed on the session socket under `token`.
  void Pass(const Client& client, uint64_t token, UniqueFd fd) {
    absl::MutexLock lock(&mu_);
    passed_session_ = client.session_id;
    passed_token_ = token;
    passed_fd_ = std::move(fd);
  }

  // Calls `method` with `client`'s token (none when null).
  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (v1::Local::Stub::*method)(
                        grpc::ClientContext*, const Request&, Response*),
                    const Client* client, const Request& request,
                    Response* response) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    if (client != nullptr) {
      context.AddMetadata(session_wire::kSessionMetadataKey, client->token);
    }
    return (stub_.get()->*method)(&context, request, response);
  }

  // The code `method` answers `client`'s `request` with (OK: 0).
  template <typename Request, typename Response>
  grpc::StatusCode CodeOf(grpc::Status (v1::Local::Stub::*method)(
                              grpc::ClientContext*, const Request&, Response*),
                          const Client* client, const Request& request) {
    Response response;
    return Call(method, client, request, &response).error_code();
  }

  // A region of `owner` named `name` (daemon-owned), through the table.
  void Allocate(const core::Caller& owner, const std::string& name,
                uint64_t size, uint32_t mode,
                core::RemoteAccess access = core::RemoteAccess::kNone) {
    ASSERT_TRUE(
        core::testing::AllocateNamed(regions_, owner, name, size, mode, access)
            .ok())
        << name;
  }
  // The cluster directory finds `name` (`size` bytes, exported with
  // `access`) at the daemon kOtherPeer.
  void InTheCluster(const std::string& name, uint64_t size,
                    core::RemoteAccess access) {
    directory_.entry = core::DirectoryEntry{
        .name = name, .node = kOtherPeer, .size = size, .access = access};
  }
  static core::Caller CallerOf(const Client& client) {
    return core::Caller{
        client.session_id, client.uid, client.uid, client.pid, {}};
  }

  DaemonIdentity identity_;
  MetricsAddress metrics_;
  std::vector<core::DeviceInfo> devices_;
  core::SessionTable sessions_;
  core::NullRegistrar registrar_;
  core::RegionLimits limits_{.max_pinned_bytes = 1 << 20};
  core::RegionTable regions_{&registrar_, limits_};
  core::TransferEngine transfers_{&regions_, nullptr};
  FakeQueues queues_;
  FakePeers peers_;
  directory::testing::FakeDirectory directory_;
  FakeInspection inspection_;
  LocalServiceDeps deps_;
  std::unique_ptr<LocalService> service_;
  std::unique_ptr<InProcessServer> server_;
  std::unique_ptr<v1::Local::Stub> stub_;

 private:
  absl::Mutex mu_;
  absl::StatusOr<local_socket::ConnectionCredentials> connection_
      ABSL_GUARDED_BY(mu_) = absl::UnavailableError("no connection");
  uint64_t passed_session_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t passed_token_ ABSL_GUARDED_BY(mu_) = 0;
  UniqueFd passed_fd_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::service::testing

#endif  // RDMAD_TESTS_UNIT_FAKES_LOCAL_SERVICE_FIXTURE_H_
