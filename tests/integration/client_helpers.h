// Client-side helpers shared by the integration tests: a session on a test
// daemon, the address of a region it exports, and running operations and
// collecting notifications on a queue.
#ifndef RDMAD_TESTS_INTEGRATION_CLIENT_HELPERS_H_
#define RDMAD_TESTS_INTEGRATION_CLIENT_HELPERS_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {

// Starts daemon `name` under `dir` into `*daemon`; a fatal test failure if
// it cannot (wrap the call in ASSERT_NO_FATAL_FAILURE).
inline void StartDaemon(const TempDir& dir, const std::string& name,
                        std::unique_ptr<DaemonProcess>* daemon,
                        DaemonOptions options = {}) {
  auto started = DaemonProcess::Start(dir.path(), name, std::move(options));
  ASSERT_TRUE(started.ok()) << started.status();
  *daemon = *std::move(started);
}

// Daemon `name` under `dir`; null (and a test failure) when it does not
// start.
inline std::unique_ptr<DaemonProcess> StartDaemonOrNull(
    const TempDir& dir, const std::string& name, DaemonOptions options = {}) {
  auto started = DaemonProcess::Start(dir.path(), name, std::move(options));
  EXPECT_TRUE(started.ok()) << started.status();
  return started.ok() ? *std::move(started) : nullptr;
}

// A client session on `daemon` whose calls have `timeout`; null (and a test
// failure) when it cannot connect.
inline std::unique_ptr<Client> Connect(
    const DaemonProcess& daemon, absl::Duration timeout = absl::Seconds(30)) {
  auto client = Client::Connect({.socket_path = daemon.socket(),
                                 .timeout = timeout});
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// A region of `client`'s own daemon as the target of queue operations (the
// daemon copies: the local path), and a buffer as large for their source.
struct OwnTarget {
  RemoteHandle handle;  // of the region, opened by name
  std::unique_ptr<Buffer> source;
};

// Creates region `name` of `size` bytes (not exported) and opens it, with a
// source buffer of `size` bytes.
inline absl::StatusOr<OwnTarget> CreateOwnTarget(Client& client,
                                                 const std::string& name,
                                                 uint64_t size) {
  if (absl::Status s = client.CreateRegion(name, size, Access::kNone).status();
      !s.ok()) {
    return s;
  }
  auto handle = client.OpenRemote({.name = name});
  if (!handle.ok()) return handle.status();
  auto source = client.Allocate(size);
  if (!source.ok()) return source.status();
  return OwnTarget{*std::move(handle),
                   std::make_unique<Buffer>(*std::move(source))};
}

// Whether `client`'s daemon lists region `name` (a test failure when it
// cannot list).
inline bool HasRegion(Client& client, const std::string& name) {
  auto regions = client.ListRegions();
  EXPECT_TRUE(regions.ok()) << regions.status();
  if (!regions.ok()) return false;
  return std::any_of(
      regions->begin(), regions->end(),
      [&name](const RegionInfo& region) { return region.name == name; });
}

// Queue `id` as `client`'s daemon lists it (ListQueues); a test failure,
// and an empty QueueInfo, when it cannot list or the queue is not listed.
inline QueueInfo ListedQueue(Client& client, uint64_t id) {
  auto queues = client.ListQueues();
  EXPECT_TRUE(queues.ok()) << queues.status();
  if (queues.ok()) {
    for (const QueueInfo& q : *queues) {
      if (q.id == id) return q;
    }
  }
  ADD_FAILURE() << "queue " << id << " is not listed";
  return {};
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

// A client of a daemon set up to WRITE into one region, one operation at a
// time, for the tests of WRITEs with an immediate. Members are declared so
// that the buffer goes before the client (client.h).
struct RegionWriter {
  // A session on `daemon`, a queue, `region` opened and a 4 KiB buffer;
  // null (and a test failure) if one of them cannot be had.
  static std::unique_ptr<RegionWriter> Open(const DaemonProcess& daemon,
                                            const RemoteRegion& region) {
    auto writer = std::make_unique<RegionWriter>();
    writer->client = Connect(daemon);
    if (writer->client == nullptr) return nullptr;
    auto queue = writer->client->OpenQueue();
    auto remote = writer->client->OpenRemote(region);
    auto buf = writer->client->Allocate(4096);
    EXPECT_TRUE(queue.ok()) << queue.status();
    EXPECT_TRUE(remote.ok()) << remote.status();
    EXPECT_TRUE(buf.ok()) << buf.status();
    if (!queue.ok() || !remote.ok() || !buf.ok()) return nullptr;
    writer->queue = *std::move(queue);
    writer->remote = *std::move(remote);
    writer->buf.emplace(*std::move(buf));
    return writer;
  }
  // WRITEs `length` (at most 4 KiB) bytes at `offset` of the region with
  // `immediate` and waits for it; its status.
  absl::Status Write(uint64_t offset, uint64_t length, uint32_t immediate) {
    std::vector<Op> op = {{.kind = Op::Kind::kWrite,
                           .local = &*buf,
                           .remote = &remote,
                           .remote_offset = offset,
                           .length = length,
                           .immediate = immediate}};
    std::vector<Completion> done = RunAll(*queue, op);
    if (done.size() != 1) return absl::InternalError("no completion");
    return done[0].status;
  }

  std::unique_ptr<Client> client;
  std::unique_ptr<Queue> queue;
  RemoteHandle remote;
  std::optional<Buffer> buf;
};

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
