// LocalListener: the daemon accepts the Local socket's connections itself,
// so each call can be matched to the kernel-verified credentials of the
// connection it came on; descriptor numbers of closed connections are not
// reused for new ones; a uid's connections are bounded.
#include "daemon/local_socket/local_listener.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad::local_socket {
namespace {

using ::testing::HasSubstr;

// Answers GetStatus with the credentials the listener reports for the
// call's connection (the pid in `pid`, the uid in `device_count`), and
// remembers the call's peer string.
class EchoService final : public v1::Local::CallbackService {
 public:
  explicit EchoService(const LocalListener* listener) : listener_(listener) {}

  grpc::ServerUnaryReactor* GetStatus(
      grpc::CallbackServerContext* context, const v1::GetStatusRequest*,
      v1::GetStatusResponse* response) override {
    auto credentials = listener_->CredentialsOf(context->peer());
    {
      absl::MutexLock lock(&mu_);
      peers_.push_back(context->peer());
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (!credentials.ok()) {
      reactor->Finish(
          grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                       std::string(credentials.status().message())));
      return reactor;
    }
    response->set_pid(static_cast<uint32_t>(credentials->pid));
    response->set_device_count(credentials->uid);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  std::vector<std::string> peers() {
    absl::MutexLock lock(&mu_);
    return peers_;
  }

 private:
  const LocalListener* const listener_;
  absl::Mutex mu_;
  std::vector<std::string> peers_ ABSL_GUARDED_BY(mu_);
};

class LocalListenerTest : public ::testing::Test {
 protected:
  void Start(LocalListenerOptions options) {
    char dir[] = "/tmp/rdmad-listener-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/local.sock";
    listener_ = std::make_unique<LocalListener>(path_, options);
    service_ = std::make_unique<EchoService>(listener_.get());
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(listener_->Start(server_.get(), 0600).ok());
  }

  void TearDown() override {
    if (listener_) listener_->Stop();
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
    ::rmdir(dir_.c_str());
  }

  grpc::Status Call(const std::shared_ptr<grpc::Channel>& channel,
                    v1::GetStatusResponse* response) {
    auto stub = v1::Local::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    return stub->GetStatus(&context, {}, response);
  }

  std::shared_ptr<grpc::Channel> NewChannel() {
    // A channel of its own (not shared with earlier ones by gRPC's
    // subchannel pool), so that each is one connection.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel("unix:" + path_,
                                     grpc::InsecureChannelCredentials(), args);
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<LocalListener> listener_;
  std::unique_ptr<EchoService> service_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(LocalListenerTest, CallsCarryTheirConnectionsCredentials) {
  Start({});
  v1::GetStatusResponse response;
  auto channel = NewChannel();  // kept open for OpenConnections below
  grpc::Status status = Call(channel, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.pid(), static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(response.device_count(), ::getuid());
  EXPECT_EQ(listener_->OpenConnections(::getuid()), 1u);
  // Anything that is not one of its connections is unknown.
  for (const char* peer : {"ipv4:127.0.0.1:5555", "unix:/x", "fd:", "fd:-1",
                           "fd:99999", "fd:1x", ""}) {
    auto credentials = listener_->CredentialsOf(peer);
    EXPECT_EQ(credentials.status().code(), absl::StatusCode::kUnauthenticated)
        << peer;
  }
}

TEST_F(LocalListenerTest, ClosedConnectionsNumbersAreNotReusedAtOnce) {
  Start({});
  std::vector<std::string> seen;
  for (int i = 0; i < 4; ++i) {
    {
      auto channel = NewChannel();
      v1::GetStatusResponse response;
      ASSERT_TRUE(Call(channel, &response).ok());
    }  // the channel, and its connection, go away
    // Until the server has closed its end, its number is not free anyway:
    // wait for that, so that the next accept would get the same number.
    const absl::Time until = absl::Now() + absl::Seconds(30);
    while (listener_->OpenConnections(::getuid()) != 0 && absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    ASSERT_EQ(listener_->OpenConnections(::getuid()), 0u);
  }
  const std::vector<std::string> peers = service_->peers();
  ASSERT_EQ(peers.size(), 4u);
  for (const std::string& peer : peers) {
    EXPECT_THAT(peer, ::testing::StartsWith("fd:"));
    EXPECT_EQ(std::count(peers.begin(), peers.end(), peer), 1)
        << "descriptor number reused at once: " << peer;
  }
}

TEST_F(LocalListenerTest, ConnectionsPerUidAreBounded) {
  Start({.max_connections_per_uid = 2});
  std::vector<int> fds;
  auto connect = [&] {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              0);
    fds.push_back(fd);
    return fd;
  };
  connect();
  connect();
  const int third = connect();
  timeval tv{30, 0};
  ::setsockopt(third, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char byte;
  // Closed at accept: end of stream (not a timeout).
  EXPECT_EQ(::recv(third, &byte, 1, 0), 0);
  EXPECT_EQ(listener_->OpenConnections(::getuid()), 2u);
  for (int fd : fds) ::close(fd);
}

TEST_F(LocalListenerTest, StopRemovesTheSocketFile) {
  Start({});
  EXPECT_EQ(::access(path_.c_str(), F_OK), 0);
  listener_->Stop();
  EXPECT_NE(::access(path_.c_str(), F_OK), 0);
  listener_->Stop();  // idempotent
}

}  // namespace
}  // namespace rdmad::local_socket
