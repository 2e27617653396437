// Notifications end to end (include/rdmad/queue.h, daemon/ring): a writer
// never stops its receiver's queues nor holds back the receiver's own
// operations (a second uid bursting into a world-writable inbox), a
// receiver that does not poll during a burst then gets every notification
// in order, a notification queue opened after the writes gets them too,
// and each names its writer: the writing daemon's Peer address, and a local
// writer's uid. Runs over TCP on the host and over verbs in the soft-RoCE
// lab (RDMAD_TEST_TRANSPORT=verbs).
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kNobody = 65534;
constexpr uint64_t kBlock = 4096;  // queue_client's operation size

// The immediates of `notes` in order (a loss entry as "lost N").
std::vector<std::string> Immediates(const std::vector<Completion>& notes) {
  std::vector<std::string> out;
  for (const Completion& c : notes) {
    out.push_back(c.kind == Completion::Kind::kNotificationsLost
                      ? absl::StrCat("lost ", c.lost)
                      : absl::StrCat(c.immediate));
  }
  return out;
}

std::vector<std::string> Count(uint32_t from, uint32_t to) {
  std::vector<std::string> out;
  for (uint32_t i = from; i < to; ++i) out.push_back(absl::StrCat(i));
  return out;
}

Transport DataTransport() {
  return TestTransport() == "verbs" ? Transport::kVerbs : Transport::kTcp;
}

class NotificationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartDaemon(dir_, "a", &a_));
    ASSERT_NO_FATAL_FAILURE(StartDaemon(dir_, "b", &b_));
    owner_ = Connect(*b_);
    ASSERT_TRUE(owner_);
  }

  // `count` WRITEs of 64 bytes from a client of A into B's `name`, each
  // with its index as immediate, one at a time (so that B receives them
  // in this order): each must complete OK.
  void WriteFromA(const std::string& name, uint32_t count) {
    auto writer = RegionWriter::Open(*a_, Remote(*b_, name));
    ASSERT_TRUE(writer);
    for (uint32_t i = 0; i < count; ++i) {
      const absl::Status s = writer->Write(i * 64, 64, i);
      ASSERT_TRUE(s.ok()) << "WRITE " << i << ": " << s
                          << " (the data landed: the notification is the "
                             "daemon's job)";
    }
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> a_, b_;
  std::unique_ptr<Client> owner_;  // B's, root's when the suite runs as root
};

// The report's burst: a second local uid writes 65 WRITEs with an immediate
// into a 0666 inbox of another uid that has two notification queues of 8
// entries. Neither queue stops, the owner's own operations go on, every
// WRITE succeeds, and both queues then get all 65, in order, each naming
// the writer's uid.
TEST_F(NotificationTest, ASecondUidCannotStopItsReceiversQueues) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "\n\n*** SKIPPED: a writer of another uid needs root to "
                    "setuid(nobody); run the suite as root (CI does) to "
                    "cover it. ***\n";
  }
  // nobody must be able to reach the socket inside our private temp dir.
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  ASSERT_TRUE(owner_
                  ->CreateRegion("inbox", 65 * kBlock, Access::kReadWrite,
                                 RegionOptions{.mode = 0666})
                  .ok());
  auto second_session = Connect(*b_);
  ASSERT_TRUE(second_session);
  auto notes = owner_->OpenQueue(
      {.depth = 8, .completion_depth = 8, .notifications = true});
  auto other_notes = second_session->OpenQueue(
      {.depth = 8, .completion_depth = 8, .notifications = true});
  ASSERT_TRUE(notes.ok() && other_notes.ok());

  ProcessResult burst =
      RunProcess({"/usr/bin/setpriv", absl::StrCat("--reuid=", kNobody),
                  absl::StrCat("--regid=", kNobody), "--clear-groups",
                  QUEUE_CLIENT_PATH, b_->socket(), "inbox", "0",
                  absl::StrCat(65 * kBlock), "1", "immediates"},
                 "", absl::Seconds(120));
  ASSERT_EQ(burst.exit_code, 0) << burst.err;
  EXPECT_THAT(burst.out, HasSubstr("wrote 65"));

  EXPECT_TRUE((*notes)->status().ok()) << (*notes)->status();
  EXPECT_TRUE((*other_notes)->status().ok()) << (*other_notes)->status();
  // The owner's own operation, on the very queue the burst fills: it has
  // half the ring to itself.
  auto inbox = owner_->OpenRemote(*RemoteRegion::Parse("inbox"));
  ASSERT_TRUE(inbox.ok()) << inbox.status();
  auto buf = owner_->Allocate(4096);
  ASSERT_TRUE(buf.ok());
  std::vector<Op> own = {{.kind = Op::Kind::kRead,
                          .local = &*buf,
                          .remote = &*inbox,
                          .length = 4096,
                          .tag = 777}};
  std::vector<Completion> notified;
  std::vector<Completion> done = RunAll(**notes, own, &notified);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tag, 777u);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;

  for (auto* queue : {&*notes, &*other_notes}) {
    std::vector<Completion> all =
        queue == &*notes ? notified : std::vector<Completion>{};
    std::vector<Completion> rest = PollNotifications(**queue, 65 - all.size());
    all.insert(all.end(), rest.begin(), rest.end());
    EXPECT_EQ(Immediates(all), Count(0, 65));
    for (const Completion& c : all) {
      EXPECT_EQ(c.kind, Completion::Kind::kNotification);
      EXPECT_EQ(c.writer_uid, kNobody) << "who wrote";
      EXPECT_EQ(c.writer, b_->peer_address()) << "on this node";
      EXPECT_EQ(c.transport, Transport::kLocal);
    }
    const QueueInfo listed = ListedQueue(*owner_, (*queue)->id());
    EXPECT_EQ(listed.notified, 65u);
    EXPECT_EQ(listed.notifications_held, 0u);
    EXPECT_EQ(listed.notifications_lost, 0u);
    EXPECT_TRUE(listed.stop_reason.ok()) << listed.stop_reason;
  }
}

// A receiver that polls nothing during a burst from another node loses
// nothing: four notifications fit its ring, the daemon holds the rest, and
// all of them come in order once it polls, naming the writing daemon.
TEST_F(NotificationTest, AReceiverThatDoesNotPollGetsEveryNotificationInOrder) {
  auto region = owner_->CreateRegion("inbox", 64 * 1024, Access::kReadWrite);
  ASSERT_TRUE(region.ok()) << region.status();
  auto notes = owner_->OpenQueue(
      {.depth = 8, .completion_depth = 8, .notifications = true});
  ASSERT_TRUE(notes.ok()) << notes.status();
  WriteFromA("inbox", 100);
  const QueueInfo listed = ListedQueue(*owner_, (*notes)->id());
  EXPECT_EQ(listed.notified, 4u) << "half of its ring";
  EXPECT_EQ(listed.notifications_held, 96u);
  EXPECT_TRUE(listed.stop_reason.ok()) << listed.stop_reason;

  std::vector<Completion> all = PollNotifications(**notes, 100);
  EXPECT_EQ(Immediates(all), Count(0, 100));
  for (const Completion& c : all) {
    EXPECT_EQ(c.region, region->id);
    EXPECT_EQ(c.offset, c.immediate * 64u);
    EXPECT_EQ(c.bytes, 64u);
    EXPECT_EQ(c.writer, a_->peer_address()) << "the writing daemon";
    EXPECT_FALSE(c.writer_uid.has_value()) << "no uid from another node";
    EXPECT_EQ(c.transport, DataTransport());
  }
  EXPECT_TRUE((*notes)->status().ok()) << (*notes)->status();
  EXPECT_EQ(ListedQueue(*owner_, (*notes)->id()).notifications_held, 0u);
}

// No notification queue open while the writes land: the daemon keeps them
// for the owner, and the queue it opens afterwards gets them first, then
// what comes next (here from a writer on its own node).
TEST_F(NotificationTest, AQueueOpenedAfterTheWritesGetsThem) {
  auto region = owner_->CreateRegion("inbox", 64 * 1024, Access::kReadWrite);
  ASSERT_TRUE(region.ok()) << region.status();
  WriteFromA("inbox", 10);
  auto notes = owner_->OpenQueue({.notifications = true});
  ASSERT_TRUE(notes.ok()) << notes.status();
  std::vector<Completion> early = PollNotifications(**notes, 10);
  EXPECT_EQ(Immediates(early), Count(0, 10));
  for (const Completion& c : early) EXPECT_EQ(c.writer, a_->peer_address());

  auto local = RegionWriter::Open(*b_, *RemoteRegion::Parse("inbox"));
  ASSERT_TRUE(local);
  ASSERT_TRUE(local->Write(0, 8, 10).ok());
  std::vector<Completion> next = PollNotifications(**notes, 1);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].immediate, 10u);
  EXPECT_EQ(next[0].writer, b_->peer_address());
  EXPECT_EQ(next[0].writer_uid, ::getuid());
  EXPECT_EQ(next[0].transport, Transport::kLocal);
}

}  // namespace
}  // namespace rdmad::testing
