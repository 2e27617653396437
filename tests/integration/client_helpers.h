// Client-side helpers shared by the integration tests: a session on a test
// daemon, and the address of a region it exports.
#ifndef RDMAD_TESTS_INTEGRATION_CLIENT_HELPERS_H_
#define RDMAD_TESTS_INTEGRATION_CLIENT_HELPERS_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {

// A client session on `daemon` whose calls have `timeout`; null (and a test
// failure) when it cannot connect.
inline std::unique_ptr<Client> Connect(
    const DaemonProcess& daemon, absl::Duration timeout = absl::Seconds(30)) {
  auto client = Client::Connect({.socket_path = daemon.socket(),
                                 .timeout = timeout});
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// Region `name` exported by `daemon`, as another daemon's client names it.
inline RemoteRegion Remote(const DaemonProcess& daemon,
                           const std::string& name) {
  RemoteRegion r;
  r.peer = daemon.peer_address();
  r.name = name;
  return r;
}

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_INTEGRATION_CLIENT_HELPERS_H_
