// The client library across a restart of its daemon: the next call opens a
// new session by itself; buffers of the old session report, precisely, that
// they are gone; views of named regions are mapped again in place; and
// ClientOptions take RDMAD_SOCKET as rdmactl does.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;

class ClientReconnectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = DaemonProcess::Start(dir_.path(), "d");
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    client_ = Connect(*daemon_);
    ASSERT_TRUE(client_);
  }

  bool HasRegion(const std::string& name) {
    auto regions = client_->ListRegions();
    EXPECT_TRUE(regions.ok()) << regions.status();
    if (!regions.ok()) return false;
    for (const RegionInfo& region : *regions) {
      if (region.name == name) return true;
    }
    return false;
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(ClientReconnectTest, NextCallAfterARestartOpensANewSession) {
  auto owned = client_->Allocate(4096);
  ASSERT_TRUE(owned.ok()) << owned.status();
  ASSERT_TRUE(client_->CreateRegion("kv", 8192, Access::kNone).ok());
  auto view = client_->MapRegion("kv");
  ASSERT_TRUE(view.ok()) << view.status();
  char* const view_data = view->data();

  ASSERT_TRUE(daemon_->Restart().ok()) << daemon_->LogTail();

  // No error, no reconnect by the application: a new session.
  auto status = client_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->pid, static_cast<uint32_t>(daemon_->pid()));

  // The new daemon knows nothing of the old session's buffer.
  ASSERT_TRUE(client_->CreateRegion("target", 4096, Access::kNone).ok());
  auto stale = client_->Write(*owned, 0, {.name = "target"}, 0, 10);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition)
      << stale.status();
  EXPECT_THAT(stale.status().message(), HasSubstr("rdmad restarted"));
  EXPECT_THAT(stale.status().message(), HasSubstr("Allocate a new buffer"));

  // A view of "kv", which the restart took away: says so.
  auto gone = client_->Write(*view, 0, {.name = "target"}, 0, 10);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound) << gone.status();
  EXPECT_THAT(gone.status().message(), HasSubstr("Create it again"));

  // Recreated (by an operator, say): the view is mapped onto it again, in
  // place, and moves its bytes.
  ASSERT_TRUE(client_->CreateRegion("kv", 8192, Access::kNone).ok());
  auto moved = client_->Write(*view, 0, {.name = "target"}, 0, 10);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(view->data(), view_data);
  std::memcpy(view->data(), "fresh", 5);
  auto other = client_->MapRegion("kv");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(std::memcmp(other->data(), "fresh", 5), 0);

  // Releasing the old buffer frees nothing in the new daemon, although its
  // id may now name another region there.
  EXPECT_TRUE(owned->Release().ok());
  EXPECT_TRUE(HasRegion("kv"));
  EXPECT_TRUE(HasRegion("target"));
  auto fresh = client_->Allocate(4096);
  EXPECT_TRUE(fresh.ok()) << fresh.status();
}

TEST_F(ClientReconnectTest, WhileTheDaemonIsDownCallsSaySoThenRecover) {
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
