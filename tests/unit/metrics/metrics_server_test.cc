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

#include "common/unique_fd.h"
#include "daemon/metrics/listening_sockets.h"
#include "daemon/transport/tcp/socket_util.h"
#include "gtest/gtest.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "tests/unit/fakes/tcp_test_util.h"

namespace rdmad::metrics {
namespace {

using tcp::LocalPortOf;
using tcp::testing::RawConnection;

// A TCP listener on 127.0.0.1, any port.
UniqueFd LoopbackListener() {
  auto listener = tcp::Listen(HostPort{"127.0.0.1", 0});
  EXPECT_TRUE(listener.ok()) << listener.status();
  return listener.ok() ? *std::move(listener) : UniqueFd();
}

// Whether a connection to 127.0.0.1:`port` is accepted.
bool Accepts(uint16_t port) { return RawConnection::Connect(port).ok(); }

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
  UniqueFd listener = LoopbackListener();
  // Bound, not listening.
  UniqueFd bound_only(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(bound_only.get(), reinterpret_cast<sockaddr*>(&addr),
                   sizeof(addr)),
            0);
  UniqueFd unix_socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const std::vector<ListeningSocket> found = ListeningTcpSockets();
  EXPECT_TRUE(Lists(found, listener.get(), LocalPortOf(listener.get())));
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
  UniqueFd listener = LoopbackListener();
  const uint16_t port = LocalPortOf(listener.get());
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
  EXPECT_FALSE(Accepts(port));
}

TEST(WakeListenerTest, LeavesADescriptorThatIsNotThatListenerAlone) {
  UniqueFd listener = LoopbackListener();
  const uint16_t port = LocalPortOf(listener.get());
  // Another port: the descriptor's number was reused for another socket.
  WakeListener(listener.get(), static_cast<uint16_t>(port + 1));
  // Not a socket at all.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[1]);
  UniqueFd read_end(fds[0]);
  WakeListener(read_end.get(), port);
  EXPECT_TRUE(Accepts(port)) << "the listener was shut down";
}

TEST(MetricsServerTest, ServesMetricsAndStopsListening) {
  auto server = MetricsServer::Start("127.0.0.1:0", std::make_shared<OneGauge>());
  ASSERT_TRUE(server.ok()) << server.status();
  const uint16_t port = (*server)->port();
  ASSERT_NE(port, 0);
  EXPECT_EQ((*server)->address(), "127.0.0.1:" + std::to_string(port));

  auto client = RawConnection::Connect(port);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(
      client->Send("GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok());
  std::string response;
  char buf[4096];
  timeval timeout{10, 0};  // a hung server fails the test, not CTest's limit
  ::setsockopt(client->fd(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  for (ssize_t n; (n = ::recv(client->fd(), buf, sizeof(buf), 0)) > 0;) {
    response.append(buf, static_cast<size_t>(n));
  }
  EXPECT_NE(response.find(" 200 "), std::string::npos) << response;
  EXPECT_NE(response.find("rdmad_test_gauge 42"), std::string::npos)
      << response;

  server->reset();
  EXPECT_FALSE(Accepts(port)) << "still listening after the server stopped";
}

TEST(MetricsServerTest, APortInUseIsUnavailable) {
  UniqueFd taken = LoopbackListener();
  auto server = MetricsServer::Start(
      "127.0.0.1:" + std::to_string(LocalPortOf(taken.get())),
      std::make_shared<OneGauge>());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnavailable)
      << server.status();
}

}  // namespace
}  // namespace rdmad::metrics
