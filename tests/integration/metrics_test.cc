// Prometheus metrics of a real rdmad: transfers between two daemons on
// loopback, then the metrics endpoint scraped over HTTP and the values
// checked against what was done. Also: the endpoint can be switched on by a
// SIGHUP reload.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/metrics_scrape.h"

namespace rdmad::testing {
namespace {

// Starts daemon `name` under `dir` into `*daemon` with its config file,
// DIR/rdmad.conf, holding `text`; returns that path (rewrite the file and
// send SIGHUP to reload). A fatal test failure if it does not start.
std::string StartWithConfig(const TempDir& dir, const std::string& name,
                            const std::string& text,
                            std::unique_ptr<DaemonProcess>* daemon) {
  const std::string conf = absl::StrCat(dir.path(), "/rdmad.conf");
  std::ofstream(conf) << text;
  DaemonOptions options;
  options.extra_args = {"--config", conf};
  StartDaemon(dir, name, daemon, std::move(options));
  return conf;
}

TEST(MetricsTest, CountsTransfersBetweenTwoDaemons) {
  TempDir dir;
  DaemonOptions with_metrics;
  with_metrics.extra_args = {"--metrics_listen", "127.0.0.1:0"};
  auto a = DaemonProcess::Start(dir.path(), "a", with_metrics);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = DaemonProcess::Start(dir.path(), "b");
  ASSERT_TRUE(b.ok()) << b.status();
  const std::string address = MetricsAddress((*a)->log_path());
  ASSERT_FALSE(address.empty()) << (*a)->LogTail();

  auto ca = Client::Connect({.socket_path = (*a)->socket()});
  auto cb = Client::Connect({.socket_path = (*b)->socket()});
  ASSERT_TRUE(ca.ok() && cb.ok());
  constexpr uint64_t kSize = 64 << 10;
  ASSERT_TRUE((*cb)->CreateRegion("dst", kSize, Access::kReadWrite).ok());
  auto buf = (*ca)->Allocate(kSize);
  ASSERT_TRUE(buf.ok()) << buf.status();
  RemoteRegion dst;
  dst.peer = (*b)->peer_address();
  dst.name = "dst";

  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*ca)->Write(*buf, 0, dst, 4096, 4096).ok());
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE((*ca)->Read(*buf, 0, dst, 0, 1000).ok());
  }
  // By descriptor: counted under the same peer.
  auto descriptor = (*cb)->GetDescriptor("dst");
  ASSERT_TRUE(descriptor.ok()) << descriptor.status();
  RemoteRegion by_descriptor;
  by_descriptor.descriptor = *descriptor;
  ASSERT_TRUE((*ca)->Read(*buf, 0, by_descriptor, 0, 1000).ok());
  // Past the end of the remote region: OUT_OF_RANGE, counted as an error.
  EXPECT_EQ((*ca)->Write(*buf, 0, dst, kSize - 10, 100).status().code(),
            absl::StatusCode::kOutOfRange);

  const std::string scrape = Scrape(address);
  ASSERT_FALSE(scrape.empty()) << "no answer from http://" << address;
  const std::string transport = TestTransport();
  const Labels writes = {
      {"peer", dst.peer}, {"op", "write"}, {"transport", transport}};
  const Labels reads = {
      {"peer", dst.peer}, {"op", "read"}, {"transport", transport}};
  EXPECT_EQ(Value(scrape, "rdmad_transfer_operations_total", writes), 3)
      << scrape;
  EXPECT_EQ(Value(scrape, "rdmad_transfer_bytes_total", writes), 3 * 4096);
  EXPECT_EQ(Value(scrape, "rdmad_transfer_operations_total", reads), 3);
  EXPECT_EQ(Value(scrape, "rdmad_transfer_bytes_total", reads), 3000);
  // Errors carry the peer too (a failing peer is what an operator looks
  // for).
  EXPECT_EQ(Value(scrape, "rdmad_transfer_errors_total",
                  {{"peer", dst.peer}, {"op", "write"}, {"kind", "out_of_range"}}),
            1)
      << scrape;
  EXPECT_EQ(Value(scrape, "rdmad_transfer_latency_seconds_count",
                  {{"op", "write"}, {"transport", transport}}),
            3);
  EXPECT_EQ(Value(scrape, "rdmad_transfer_latency_seconds_count",
                  {{"op", "read"}, {"transport", transport}}),
            3);
  // a's own state: ca's session holding one buffer (the session that
  // DaemonProcess opened to see the daemon up may not be reaped yet).
  EXPECT_GE(Value(scrape, "rdmad_sessions"), 1);
  EXPECT_EQ(Value(scrape, "rdmad_regions"), 1);
  EXPECT_GE(Value(scrape, "rdmad_pinned_bytes"), kSize);
  EXPECT_EQ(Value(scrape, "rdmad_peers", {{"state", "READY"}}), 1) << scrape;
  EXPECT_GE(Value(scrape, "rdmad_qps", {{"transport", transport}}), 1)
      << scrape;
  EXPECT_EQ(Value(scrape, "rdmad_build_info", {{"transport", transport}}), 1);
  buf->Release().IgnoreError();
}

TEST(MetricsTest, CountsQueuesAndNotifications) {
  TempDir dir;
  DaemonOptions with_metrics;
  with_metrics.extra_args = {"--metrics_listen", "127.0.0.1:0"};
  auto a = DaemonProcess::Start(dir.path(), "a", with_metrics);
  ASSERT_TRUE(a.ok()) << a.status();
  const std::string address = MetricsAddress((*a)->log_path());
  ASSERT_FALSE(address.empty()) << (*a)->LogTail();
  auto client = Client::Connect({.socket_path = (*a)->socket()});
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->CreateRegion("inbox", 4096, Access::kReadWrite).ok());
  auto notes = (*client)->OpenQueue(
      {.depth = 8, .completion_depth = 8, .notifications = true});
  auto writer = (*client)->OpenQueue();
  ASSERT_TRUE(notes.ok() && writer.ok());
  auto inbox = (*client)->OpenRemote(*RemoteRegion::Parse("inbox"));
  ASSERT_TRUE(inbox.ok()) << inbox.status();
  auto buf = (*client)->Allocate(4096);
  ASSERT_TRUE(buf.ok());
  // Nine WRITEs with an immediate into a queue nobody polls: half its
  // ring takes four, the daemon holds the other five.
  for (uint32_t i = 0; i < 9; ++i) {
    std::vector<Op> op = {{.kind = Op::Kind::kWrite, .local = &*buf,
                           .remote = &*inbox, .remote_offset = i * 8,
                           .length = 8, .tag = i, .immediate = i}};
    ASSERT_TRUE((*writer)->Submit(op).ok());
    Completion done[1];
    while ((*writer)->Poll(absl::MakeSpan(done)) == 0) {
      ASSERT_TRUE((*writer)->Wait(absl::Now() + absl::Seconds(30)).ok());
    }
    ASSERT_TRUE(done[0].status.ok()) << done[0].status;
  }
  std::string scrape = Scrape(address);
  ASSERT_FALSE(scrape.empty());
  EXPECT_EQ(
      Value(scrape, "rdmad_notifications_total", {{"result", "delivered"}}), 4)
      << scrape;
  EXPECT_EQ(Value(scrape, "rdmad_notifications_held"), 5);
  EXPECT_EQ(Value(scrape, "rdmad_notifications_total", {{"result", "lost"}}),
            0);
  EXPECT_EQ(Value(scrape, "rdmad_queues", {{"state", "stopped"}}), 0);
  EXPECT_EQ(Value(scrape, "rdmad_queues", {{"state", "running"}}), 2);
  EXPECT_GE(Value(scrape, "rdmad_queue_client_wakeups_total"), 0);
  EXPECT_GE(Value(scrape, "rdmad_queue_doorbells_total"), 0);
  // Closed queues leave the gauge; their counts stay in the counters.
  notes->reset();
  writer->reset();
  scrape = Scrape(address);
  EXPECT_EQ(Value(scrape, "rdmad_queues"), 0) << scrape;
  EXPECT_EQ(
      Value(scrape, "rdmad_notifications_total", {{"result", "delivered"}}), 4);
  EXPECT_EQ(Value(scrape, "rdmad_notifications_held"), 5)
      << "held for the uid's next notification queue";
}

// Past the uid's notification_backlog (16 here) notifications are lost,
// never silently: the receiver gets a loss entry in their place, in order,
// and the metrics count them. Every WRITE still succeeds.
TEST(MetricsTest, NotificationsPastTheBacklogAreCountedAndReported) {
  TempDir dir;
  std::unique_ptr<DaemonProcess> a;
  ASSERT_NO_FATAL_FAILURE(StartWithConfig(
      dir, "a", "notification_backlog: 16\nmetrics_listen: \"127.0.0.1:0\"\n",
      &a));
  const std::string address = MetricsAddress(a->log_path());
  ASSERT_FALSE(address.empty()) << a->LogTail();
  auto client = Connect(*a);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->CreateRegion("inbox", 4096, Access::kReadWrite).ok());
  auto notes = client->OpenQueue(
      {.depth = 8, .completion_depth = 8, .notifications = true});
  ASSERT_TRUE(notes.ok()) << notes.status();
  auto writer = RegionWriter::Open(*a, *RemoteRegion::Parse("inbox"));
  ASSERT_TRUE(writer);
  auto write = [&](uint32_t immediate) {
    const absl::Status s = writer->Write(0, 8, immediate);
    EXPECT_TRUE(s.ok()) << s;
  };
  // 40 into a queue nobody polls: 4 on its ring, 16 held, 20 lost.
  for (uint32_t i = 0; i < 40; ++i) write(i);
  std::string scrape = Scrape(address);
  EXPECT_EQ(Value(scrape, "rdmad_notifications_total", {{"result", "lost"}}),
            20)
      << scrape;
  EXPECT_EQ(Value(scrape, "rdmad_notifications_held"), 16);
  auto queues = client->ListQueues();
  ASSERT_TRUE(queues.ok());
  for (const QueueInfo& q : *queues) {
    if (q.id != (*notes)->id()) continue;
    EXPECT_EQ(q.notifications_held, 16u);
    EXPECT_EQ(q.notifications_lost, 20u);
    EXPECT_TRUE(q.stop_reason.ok()) << q.stop_reason;
  }

  // Once it polls: the 20 kept, then the count of the lost, then what
  // came after.
  std::vector<Completion> got = PollNotifications(**notes, 21);
  write(40);
  std::vector<Completion> last = PollNotifications(**notes, 1);
  got.insert(got.end(), last.begin(), last.end());
  ASSERT_EQ(got.size(), 22u);
  for (uint32_t i = 0; i < 20; ++i) {
    EXPECT_EQ(got[i].kind, Completion::Kind::kNotification) << i;
    EXPECT_EQ(got[i].immediate, i);
  }
  EXPECT_EQ(got[20].kind, Completion::Kind::kNotificationsLost);
  EXPECT_EQ(got[20].lost, 20u);
  EXPECT_EQ(got[21].immediate, 40u);
  scrape = Scrape(address);
  EXPECT_EQ(Value(scrape, "rdmad_notifications_held"), 0);
  EXPECT_EQ(
      Value(scrape, "rdmad_notifications_total", {{"result", "delivered"}}),
      21);
}

TEST(MetricsTest, ReloadTurnsTheEndpointOn) {
  TempDir dir;
  std::unique_ptr<DaemonProcess> d;
  std::string conf;
  ASSERT_NO_FATAL_FAILURE(
      conf = StartWithConfig(dir, "d", "transport: \"tcp\"\n", &d));
  EXPECT_EQ(d->Log().find("metrics on"), std::string::npos);

  std::ofstream(conf) << "transport: \"tcp\"\nmetrics_listen: \"127.0.0.1:0\"\n";
  ::kill(d->pid(), SIGHUP);
  const std::string address = MetricsAddress(d->log_path());
  ASSERT_FALSE(address.empty()) << d->LogTail();
  const std::string scrape = Scrape(address);
  EXPECT_GE(Value(scrape, "rdmad_sessions"), 0) << scrape;  // present
  EXPECT_NE(d->Log()
                .find("config reload: metrics_listen changed from (unset) to "
                      "\"127.0.0.1:0\": applied"),
            std::string::npos)
      << d->LogTail();
}

TEST(MetricsTest, ReloadToABusyPortKeepsTheOldEndpoint) {
  TempDir dir;
  std::unique_ptr<DaemonProcess> d;
  std::string conf;
  ASSERT_NO_FATAL_FAILURE(
      conf = StartWithConfig(
          dir, "d", "transport: \"tcp\"\nmetrics_listen: \"127.0.0.1:0\"\n",
          &d));
  const std::string address = MetricsAddress(d->log_path());
  ASSERT_FALSE(address.empty()) << d->LogTail();

  // A port this test holds: the new endpoint cannot bind there.
  const int busy = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(busy, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(busy, 1), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(busy, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string taken = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));

  std::ofstream(conf) << "transport: \"tcp\"\nmetrics_listen: \"" << taken
                      << "\"\n";
  ::kill(d->pid(), SIGHUP);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (d->Log().find("could not be applied") ==
             std::string::npos &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_NE(d->Log()
                .find(absl::StrCat("metrics_listen changed from "
                                   "\"127.0.0.1:0\" to \"",
                                   taken, "\" but could not be applied")),
            std::string::npos)
      << d->LogTail();
  // Still served where it was, and the daemon still runs.
  EXPECT_GE(Value(Scrape(address), "rdmad_sessions"), 0);
  ::close(busy);
}

}  // namespace
}  // namespace rdmad::testing
