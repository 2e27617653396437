// socket_util: naming a peer's host, as the TCP data server counts
// connections per address (address_slots.h).
#include "daemon/transport/tcp/socket_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "gtest/gtest.h"
#include "tests/unit/fakes/tcp_test_util.h"

namespace rdmad::tcp {
namespace {

// The address getpeername gives for `fd`; AF_UNSPEC if it gives none.
sockaddr_storage PeerOf(int fd) {
  sockaddr_storage peer{};
  socklen_t length = sizeof(peer);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) {
    peer.ss_family = AF_UNSPEC;
  }
  return peer;
}

TEST(HostOfTest, LoopbackHosts) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.3.2.1"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_FALSE(IsLoopbackHost("10.127.0.1"));
  EXPECT_FALSE(IsLoopbackHost("::ffff:10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost(""));
}

TEST(HostOfTest, NamesTheSourceAddressWithoutItsPort) {
  auto listener = Listen(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(listener.ok()) << listener.status();
  const uint16_t port = LocalPortOf(listener->get());
  auto client = testing::RawConnection::Connect(port, "127.0.0.3");
  ASSERT_TRUE(client.ok()) << client.status();
  UniqueFd accepted(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted);
  EXPECT_EQ(HostOf(PeerOf(accepted.get())), "127.0.0.3");
  EXPECT_EQ(HostOf(PeerOf(listener->get())), "");  // not connected
}

TEST(HostOfTest, AnIpv4MappedAddressIsItsIpv4Address) {
  sockaddr_storage storage{};
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
  in6->sin6_family = AF_INET6;
  ASSERT_EQ(::inet_pton(AF_INET6, "::ffff:192.0.2.7", &in6->sin6_addr), 1);
  EXPECT_EQ(HostOf(storage), "192.0.2.7");
  ASSERT_EQ(::inet_pton(AF_INET6, "2001:db8::1", &in6->sin6_addr), 1);
  EXPECT_EQ(HostOf(storage), "2001:db8::1");
}

}  // namespace
}  // namespace rdmad::tcp
