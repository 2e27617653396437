// The client library across a restart of its daemon: the next call opens a
// new session by itself; buffers of the old session report, precisely, that
// they are gone; views of named regions are mapped again in place; queues
// and remote handles of the old session are refused, not misread as the new
// session's; and ClientOptions take RDMAD_SOCKET as rdmactl does. Write
// and Batch behave the same on the shared queue and as gRPC calls (the
// library's internal RPC path).
#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "client/rpc_path.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/restart_helpers.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;

// How the test's Write and Batch reach the daemon.
enum class Path { kQueue, kRpc };

class ClientReconnectTest : public ::testing::TestWithParam<Path> {
 protected:
  void SetUp() override { Start({}); }

  void Start(std::vector<std::string> extra_args) {
    DaemonOptions options;
    options.extra_args = std::move(extra_args);
    auto d = DaemonProcess::Start(dir_.path(), "d", options);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    auto client = Client::Connect({.socket_path = daemon_->socket()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // Client::Batch, or the same as Local gRPC calls.
  absl::StatusOr<std::vector<Completion>> Batch(absl::Span<const Op> ops) {
    return GetParam() == Path::kQueue
               ? client_->Batch(ops)
               : client_internal::RpcPath::Run(*client_, ops);
  }

  // Client::Write, or the same as a Local gRPC call.
  absl::StatusOr<Completion> Write(const Buffer& local, uint64_t local_offset,
                                   const RemoteRegion& remote,
                                   uint64_t remote_offset, uint64_t length) {
    if (GetParam() == Path::kQueue) {
      return client_->Write(local, local_offset, remote, remote_offset, length);
    }
    const Op op{.kind = Op::Kind::kWrite,
                .local = &local,
                .local_offset = local_offset,
                .remote = &remote,
                .remote_offset = remote_offset,
                .length = length};
    auto done = Batch({&op, 1});
    if (!done.ok()) return done.status();
    if (!(*done)[0].status.ok()) return (*done)[0].status;
    return (*done)[0];
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_P(ClientReconnectTest, NextCallAfterARestartOpensANewSession) {
  auto owned = client_->Allocate(4096);
  ASSERT_TRUE(owned.ok()) << owned.status();
  ASSERT_TRUE(client_->CreateRegion("kv", 8192, Access::kNone).ok());
  ASSERT_TRUE(client_->CreateRegion("target", 4096, Access::kNone).ok());
  auto view = client_->MapRegion("kv");
  ASSERT_TRUE(view.ok()) << view.status();
  char* const view_data = view->data();
  // Before the restart: the shared queue and its handle for "target" exist.
  ASSERT_TRUE(Write(*view, 0, {.name = "target"}, 0, 10).ok());

  ASSERT_TRUE(daemon_->Restart().ok()) << daemon_->LogTail();

  // No error, no reconnect by the application: a new session.
  auto status = client_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->pid, static_cast<uint32_t>(daemon_->pid()));

  // The new daemon knows nothing of the old session's buffer.
  ASSERT_TRUE(client_->CreateRegion("target", 4096, Access::kNone).ok());
  auto stale = Write(*owned, 0, {.name = "target"}, 0, 10);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition)
      << stale.status();
  EXPECT_THAT(stale.status().message(), HasSubstr("rdmad restarted"));
  EXPECT_THAT(stale.status().message(), HasSubstr("Allocate a new buffer"));

  // A view of "kv", which the restart took away: says so.
  auto gone = Write(*view, 0, {.name = "target"}, 0, 10);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound) << gone.status();
  EXPECT_THAT(gone.status().message(), HasSubstr("Create it again"));

  // Recreated (by an operator, say): the view is mapped onto it again, in
  // place, and moves its bytes (on the shared queue: a new queue, a new
  // handle for "target").
  ASSERT_TRUE(client_->CreateRegion("kv", 8192, Access::kNone).ok());
  auto moved = Write(*view, 0, {.name = "target"}, 0, 5);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(view->data(), view_data);
  std::memcpy(view->data(), "fresh", 5);  // the new region's memory now
  ASSERT_TRUE(Write(*view, 0, {.name = "target"}, 0, 5).ok());
  auto target = client_->MapRegion("target");
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(std::memcmp(target->data(), "fresh", 5), 0);
  const RemoteRegion target_region{.name = "target"};
  auto batch = Batch({{.kind = Op::Kind::kRead,
                       .local = &*view,
                       .local_offset = 100,
                       .remote = &target_region,
                       .length = 5}});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_TRUE((*batch)[0].status.ok()) << (*batch)[0].status;

  // Releasing the old buffer frees nothing in the new daemon, although its
  // id may now name another region there.
  EXPECT_TRUE(owned->Release().ok());
  EXPECT_TRUE(HasRegion(*client_, "kv"));
  EXPECT_TRUE(HasRegion(*client_, "target"));
  auto fresh = client_->Allocate(4096);
  EXPECT_TRUE(fresh.ok()) << fresh.status();
}

// The first call after a restart may be a transfer: it opens the session
// (and on the shared queue, a queue) itself. Named regions kept in a state
// directory are there again, so it succeeds.
TEST_P(ClientReconnectTest, ATransferIsTheFirstCallAfterARestart) {
  StateDirBase state(dir_.path());
  daemon_.reset();
  client_.reset();
  Start({"--state_dir", state.state_dir()});
  ASSERT_TRUE(client_->CreateRegion("src", 4096, Access::kNone).ok());
  ASSERT_TRUE(client_->CreateRegion("dst", 4096, Access::kNone).ok());
  auto src = client_->MapRegion("src");
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_TRUE(Write(*src, 0, {.name = "dst"}, 0, 4).ok());

  daemon_->Kill();
  ASSERT_TRUE(daemon_->Restart().ok()) << daemon_->LogTail();

  std::memcpy(src->data(), "kept", 4);
  auto done = Write(*src, 0, {.name = "dst"}, 8, 4);
  ASSERT_TRUE(done.ok()) << done.status();
  auto dst = client_->MapRegion("dst");
  ASSERT_TRUE(dst.ok()) << dst.status();
  EXPECT_EQ(std::string(dst->data() + 8, 4), "kept");
}

// Destroying a buffer after a restart no call has noticed yet frees
// nothing: its id names, in the new daemon, a kept region of the same owner.
TEST_P(ClientReconnectTest, ReleaseAfterAnUnnoticedRestartFreesNothingNew) {
  StateDirBase state(dir_.path());
  daemon_.reset();
  client_.reset();
  Start({"--state_dir", state.state_dir()});
  auto owned = client_->Allocate(4096);  // id 1 in this daemon
  ASSERT_TRUE(owned.ok()) << owned.status();
  ASSERT_TRUE(client_->CreateRegion("kept", 4096, Access::kNone).ok());
  ASSERT_EQ(owned->id(), 1u);

  daemon_->Kill();
  ASSERT_TRUE(daemon_->Restart().ok()) << daemon_->LogTail();
  // The new daemon adopts "kept" as its region 1.
  EXPECT_TRUE(owned->Release().ok());
  auto regions = client_->ListRegions();
  ASSERT_TRUE(regions.ok()) << regions.status();
  ASSERT_EQ(regions->size(), 1u);
  EXPECT_EQ((*regions)[0].name, "kept");
  EXPECT_EQ((*regions)[0].id, 1u);
}

// A Queue and RemoteHandles of the application's own belong to the session
// they were opened in: after a restart they fail FAILED_PRECONDITION, and
// closing them touches nothing of the new session (whose ids start again).
TEST_P(ClientReconnectTest, OldQueuesAndHandlesAreRefusedNotMisread) {
  ASSERT_TRUE(client_->CreateRegion("dst", 4096, Access::kNone).ok());
  auto old_queue = client_->OpenQueue();
  ASSERT_TRUE(old_queue.ok()) << old_queue.status();
  auto old_handle = client_->OpenRemote({.name = "dst"});
  ASSERT_TRUE(old_handle.ok()) << old_handle.status();
  EXPECT_EQ(old_handle->transport(), Transport::kLocal);
  EXPECT_EQ(old_handle->access(), Access::kReadWrite);  // the owner's mode

  ASSERT_TRUE(daemon_->Restart().ok()) << daemon_->LogTail();
  ASSERT_TRUE(client_->GetStatus().ok());

  EXPECT_EQ((*old_queue)->status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT((*old_queue)->status().message(), HasSubstr("rdmad restarted"));
  auto buf = client_->Allocate(4096);
  ASSERT_TRUE(buf.ok()) << buf.status();
  Op op{.kind = Op::Kind::kWrite,
        .local = &*buf,
        .remote = &*old_handle,
        .length = 8};
  EXPECT_EQ((*old_queue)->Submit({&op, 1}).status().code(),
            absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(client_->CreateRegion("dst", 4096, Access::kNone).ok());
  auto queue = client_->OpenQueue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  auto refused = (*queue)->Submit({&op, 1});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("open it again"));
  // Closing the old handle and queue is harmless to the new ones.
  EXPECT_TRUE(client_->CloseRemote(*old_handle).ok());
  old_queue->reset();
  auto handle = client_->OpenRemote({.name = "dst"});
  ASSERT_TRUE(handle.ok()) << handle.status();
  op.remote = &*handle;
  ASSERT_TRUE((*queue)->status().ok()) << (*queue)->status();
  auto queued = (*queue)->Submit({&op, 1});
  ASSERT_TRUE(queued.ok()) << queued.status();
  ASSERT_EQ(*queued, 1u);
  Completion done[1];
  ASSERT_TRUE((*queue)->Wait(absl::Now() + absl::Seconds(30)).ok());
  ASSERT_EQ((*queue)->Poll(done), 1u);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
}

// A daemon killed outright never stops its queues: Wait says the session is
// gone instead of waiting out its deadline.
TEST_P(ClientReconnectTest, WaitOnTheQueueOfAKilledDaemonSaysSo) {
  auto queue = client_->OpenQueue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  daemon_->Kill();
  const absl::Status waited = (*queue)->Wait(absl::Now() + absl::Seconds(120));
  EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable) << waited;
  EXPECT_THAT(waited.message(), HasSubstr("stopped or restarted"));
  EXPECT_THAT(waited.message(), HasSubstr("open a new queue"));
}

// The same for epoll users (Arm, event_fd): nothing will ever make the
// eventfd readable, so Arm sends the caller to Poll and status(), and
// status() says why. A probe's epoll loop armed the queue of a daemon
// killed outright and slept for good, status() saying OK.
TEST_P(ClientReconnectTest, ArmAndStatusOnTheQueueOfAKilledDaemonSaySo) {
  auto queue = client_->OpenQueue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  EXPECT_TRUE((*queue)->status().ok());
  EXPECT_TRUE((*queue)->Arm());
  daemon_->Kill();
  EXPECT_FALSE((*queue)->Arm()) << "armed for a wake-up no one will send";
  const absl::Status status = (*queue)->status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr("stopped or restarted"));
  Completion done[1];
  EXPECT_EQ((*queue)->Poll(done), 0u);
}

// Submit does not look for the daemon on every call (a poll(2) each), so
// it queues into the ring of a killed daemon until the ring is full; then
// it says the daemon is gone, not "Poll completions first" (there will be
// none).
TEST_P(ClientReconnectTest, SubmitIntoTheFullRingOfAKilledDaemonSaysSo) {
  auto queue = client_->OpenQueue({.depth = 8});
  ASSERT_TRUE(queue.ok()) << queue.status();
  auto buf = client_->Allocate(4096);
  ASSERT_TRUE(buf.ok()) << buf.status();
  ASSERT_TRUE(client_->CreateRegion("dst", 4096, Access::kNone).ok());
  auto handle = client_->OpenRemote({.name = "dst"});
  ASSERT_TRUE(handle.ok()) << handle.status();
  daemon_->Kill();
  const Op op{.kind = Op::Kind::kWrite,
              .local = &*buf,
              .remote = &*handle,
              .length = 8};
  absl::StatusOr<size_t> queued;
  size_t total = 0;
  // Bounded: the ring holds `depth` entries, its completions twice that.
  for (int i = 0; i < 64; ++i) {
    queued = (*queue)->Submit({&op, 1});
    if (!queued.ok()) break;
    total += *queued;
  }
  ASSERT_FALSE(queued.ok()) << "Submit took " << total << " operations";
  EXPECT_EQ(queued.status().code(), absl::StatusCode::kUnavailable)
      << queued.status();
  EXPECT_THAT(queued.status().message(), HasSubstr("stopped or restarted"));
  EXPECT_EQ(total, (*queue)->depth());
}

TEST_P(ClientReconnectTest, WhileTheDaemonIsDownCallsSaySoThenRecover) {
  ASSERT_TRUE(daemon_->Stop().ok());
  auto down = client_->GetStatus();
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(down.status().message(), HasSubstr("Is rdmad running"));
  EXPECT_THAT(down.status().message(), HasSubstr("stopped or restarted"));
  ASSERT_TRUE(daemon_->Restart().ok()) << daemon_->LogTail();
  auto up = client_->GetStatus();
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->pid, static_cast<uint32_t>(daemon_->pid()));
}

INSTANTIATE_TEST_SUITE_P(BothPaths, ClientReconnectTest,
                         ::testing::Values(Path::kQueue, Path::kRpc),
                         [](const ::testing::TestParamInfo<Path>& info) {
                           return info.param == Path::kQueue ? "Queue" : "Rpc";
                         });

TEST(ClientOptionsTest, SocketDefaultsToRdmadSocket) {
  TempDir dir;
  auto d = DaemonProcess::Start(dir.path(), "d");
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(::setenv("RDMAD_SOCKET", (*d)->socket().c_str(), 1), 0);
  const ClientOptions options;
  EXPECT_EQ(options.socket_path, (*d)->socket());
  auto client = Client::Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->GetStatus().ok());
  ASSERT_EQ(::setenv("RDMAD_SOCKET", "", 1), 0);
  EXPECT_EQ(ClientOptions().socket_path, "/run/rdmad/rdmad.sock");
  ASSERT_EQ(::unsetenv("RDMAD_SOCKET"), 0);
  EXPECT_EQ(ClientOptions().socket_path, "/run/rdmad/rdmad.sock");
}

}  // namespace
}  // namespace rdmad::testing
