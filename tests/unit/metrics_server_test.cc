// MetricsServer and listening_sockets.h: the server serves /metrics on the
// port it reports, finds its own listener among the process's, and once
// stopped refuses connections; ListeningTcpSockets lists listeners only,
// and WakeListener wakes a poll() on one and touches nothing else.
#include "daemon/metrics/metrics_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "daemon/metrics/listening_sockets.h"
#include "gtest/gtest.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace rdmad::metrics {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

uint16_t LocalPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  return ntohs(addr.sin_port);
}

// A TCP socket bound to 127.0.0.1 on any port; listening if `listen`.
int LoopbackSocket(bool listen) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  if (listen) {
    EXPECT_EQ(::listen(fd, 4), 0);
  }
  return fd;
}

// Connects to 127.0.0.1:`port`; the descriptor, or -1 if refused.
int Connect(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool Lists(const std::vector<ListeningSocket>& sockets, int fd,
           uint16_t port) {
  return std::any_of(sockets.begin(), sockets.end(),
                     [&](const ListeningSocket& s) {
                       return s.fd == fd && s.port == port;
                     });
}

class OneGauge : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily family;
    family.name = "rdmad_test_gauge";
    family.help = "a gauge of the test";
    family.type = prometheus::MetricType::Gauge;
    prometheus::ClientMetric metric;
    metric.gauge.value = 42;
    family.metric.push_back(metric);
    return {family};
  }
};

TEST(ListeningTcpSocketsTest, ListsListenersWithTheirPortsAndNothingElse) {
  Fd listener(LoopbackSocket(/*listen=*/true));
  Fd bound_only(LoopbackSocket(/*listen=*/false));
  Fd unix_socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const std::vector<ListeningSocket> found = ListeningTcpSockets();
  EXPECT_TRUE(Lists(found, listener.get(), LocalPort(listener.get())));
  for (const ListeningSocket& s : found) {
    EXPECT_NE(s.fd, bound_only.get());
    EXPECT_NE(s.fd, unix_socket.get());
  }
  EXPECT_TRUE(std::is_sorted(found.begin(), found.end(),
                             [](const ListeningSocket& a,
                                const ListeningSocket& b) {
                               return a.fd < b.fd;
                             }));
}

TEST(WakeListenerTest, WakesAPollOnTheListenerAndRefusesNewConnections) {
  Fd listener(LoopbackSocket(/*listen=*/true));
  const uint16_t port = LocalPort(listener.get());
  int revents = 0;
  // No deadline in the poll would hang the test if the wake failed; 60 s
  // is far longer than any wake takes and far shorter than CTest's limit.
  std::thread poller([&] {
    pollfd pfd{listener.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 60'000) == 1) revents = pfd.revents;
  });
  WakeListener(listener.get(), port);
  poller.join();
  EXPECT_NE(revents, 0) << "the poll timed out: the listener was not woken";
  EXPECT_EQ(Connect(port), -1);
}

TEST(WakeListenerTest, LeavesADescriptorThatIsNotThatListenerAlone) {
  Fd listener(LoopbackSocket(/*listen=*/true));
  const uint16_t port = LocalPort(listener.get());
  // Another port: the descriptor's number was reused for another socket.
  WakeListener(listener.get(), static_cast<uint16_t>(port + 1));
  // Not a socket at all.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[1]);
  Fd read_end(fds[0]);
  WakeListener(read_end.get(), port);
  const int client = Connect(port);
  EXPECT_GE(client, 0) << "the listener was shut down";
  if (client >= 0) ::close(client);
}

TEST(MetricsServerTest, ServesMetricsAndStopsListening) {
  auto server = MetricsServer::Start("127.0.0.1:0", std::make_shared<OneGauge>());
  ASSERT_TRUE(server.ok()) << server.status();
  const uint16_t port = (*server)->port();
  ASSERT_NE(port, 0);
  EXPECT_EQ((*server)->address(), "127.0.0.1:" + std::to_string(port));

  Fd client(Connect(port));
  ASSERT_GE(client.get(), 0);
  const std::string request =
      "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_EQ(::send(client.get(), request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::string response;
  char buf[4096];
  timeval timeout{10, 0};  // a hung server fails the test, not CTest's limit
  ::setsockopt(client.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  for (ssize_t n; (n = ::recv(client.get(), buf, sizeof(buf), 0)) > 0;) {
    response.append(buf, static_cast<size_t>(n));
  }
  EXPECT_NE(response.find(" 200 "), std::string::npos) << response;
  EXPECT_NE(response.find("rdmad_test_gauge 42"), std::string::npos)
      << response;

  server->reset();
  EXPECT_EQ(Connect(port), -1) << "still listening after the server stopped";
}

TEST(MetricsServerTest, APortInUseIsUnavailable) {
  Fd taken(LoopbackSocket(/*listen=*/true));
  auto server = MetricsServer::Start(
      "127.0.0.1:" + std::to_string(LocalPort(taken.get())),
      std::make_shared<OneGauge>());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnavailable)
      << server.status();
}

}  // namespace
}  // namespace rdmad::metrics
