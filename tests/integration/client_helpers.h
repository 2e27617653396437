// Client-side helpers shared by the integration tests: a session on a test
// daemon, the address of a region it exports, and running operations and
// collecting notifications on a queue.
#ifndef RDMAD_TESTS_INTEGRATION_CLIENT_HELPERS_H_
#define RDMAD_TESTS_INTEGRATION_CLIENT_HELPERS_H_

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"
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

// Submits `ops` on `queue` and collects one completion each (test failures
// for a Submit or Wait that fails). Notifications that come on the queue
// meanwhile go to `notifications` when given, else they are dropped.
inline std::vector<Completion> RunAll(
    Queue& queue, std::vector<Op>& ops,
    std::vector<Completion>* notifications = nullptr) {
  std::vector<Completion> out;
  size_t submitted = 0;
  Completion c[32];
  while (out.size() < ops.size()) {
    if (submitted < ops.size()) {
      auto n = queue.Submit(absl::MakeSpan(ops).subspan(submitted));
      EXPECT_TRUE(n.ok() || absl::IsResourceExhausted(n.status()))
          << n.status();
      if (!n.ok() && !absl::IsResourceExhausted(n.status())) break;
      if (n.ok()) submitted += *n;
    }
    size_t got = queue.Poll(absl::MakeSpan(c));
    if (got == 0) {
      absl::Status waited = queue.Wait(absl::Now() + absl::Seconds(60));
      EXPECT_TRUE(waited.ok()) << waited;
      if (!waited.ok()) break;
      got = queue.Poll(absl::MakeSpan(c));
    }
    for (size_t i = 0; i < got; ++i) {
      if (c[i].kind == Completion::Kind::kCompletion) {
        out.push_back(c[i]);
      } else if (notifications != nullptr) {
        notifications->push_back(c[i]);
      }
    }
  }
  return out;
}

// Polls `queue` until `want` entries (notifications, loss counts) came, or
// `timeout` passed (then fewer, and a test failure).
inline std::vector<Completion> PollNotifications(
    Queue& queue, size_t want, absl::Duration timeout = absl::Seconds(60)) {
  std::vector<Completion> out;
  const absl::Time end = absl::Now() + timeout;
  Completion c[32];
  while (out.size() < want) {
    const size_t got = queue.Poll(absl::MakeSpan(c));
    out.insert(out.end(), c, c + got);
    if (got > 0) continue;
    if (absl::Now() >= end) break;
    absl::Status waited =
        queue.Wait(std::min(end, absl::Now() + absl::Seconds(1)));
    if (!waited.ok() && !absl::IsDeadlineExceeded(waited)) {
      ADD_FAILURE() << waited;
      break;
    }
  }
  EXPECT_EQ(out.size(), want) << "entries on the notification queue";
  return out;
}

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_INTEGRATION_CLIENT_HELPERS_H_
