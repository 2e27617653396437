// Shared-memory queues end to end (include/rdmad/queue.h, daemon/ring):
// threads and separate client processes moving data through their own
// queues with byte-identical results, notifications of WRITEs with an
// immediate (from another daemon and from this one), a client killed with
// operations in flight, and a client that scribbles on its ring. Runs over
// TCP on the host and over verbs in the soft-RoCE lab
// (RDMAD_TEST_TRANSPORT=verbs).
#include <dirent.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/queue_layout.h"
#include "common/queue_ring.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/raw_session.h"
#include "tests/thread_migrations.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;

void Fill(char* p, uint64_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<char>(x);
  }
}

// How many of `pid`'s descriptors are queue segments (memfds the daemon
// names rdmad-queue-ID); -1 if the process is gone.
int QueueSegments(pid_t pid) {
  auto targets = FdTargets(pid);
  if (!targets) return -1;
  int n = 0;
  for (const std::string& target : *targets) {
    n += target.find("rdmad-queue-") != std::string::npos;
  }
  return n;
}

// Waits up to `timeout` for `done`; false if it never was.
template <typename F>
bool Eventually(F done, absl::Duration timeout = absl::Seconds(30)) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return done();
}

// A queue opened the way a hostile client would: over a raw session, its
// segment mapped writable, no client library in between.
class HostileQueue {
 public:
  static absl::StatusOr<std::unique_ptr<HostileQueue>> Open(
      const std::string& socket) {
    auto raw = RawSession::Open(socket);
    if (!raw.ok()) return raw.status();
    grpc::ClientContext context;
    (*raw)->Authorize(&context);
    v1::OpenQueueRequest request;
    request.set_submission_entries(8);
    v1::OpenQueueResponse opened;
    if (grpc::Status s = (*raw)->stub().OpenQueue(&context, request, &opened);
        !s.ok()) {
      return absl::InternalError(absl::StrCat("OpenQueue: ", s.error_message()));
    }
    auto segment = (*raw)->TakeQueueFd(opened.queue_id(), 0);
    if (!segment.ok()) return segment.status();
    auto doorbell = (*raw)->TakeQueueFd(opened.queue_id(), 1);
    if (!doorbell.ok()) return doorbell.status();
    void* base = ::mmap(nullptr, opened.segment_size(), PROT_READ | PROT_WRITE,
                        MAP_SHARED, segment->get(), 0);
    if (base == MAP_FAILED) return absl::ErrnoToStatus(errno, "mmap");
    return std::unique_ptr<HostileQueue>(new HostileQueue(
        *std::move(raw), *std::move(doorbell), base, opened.segment_size()));
  }
  ~HostileQueue() { ::munmap(base_, size_); }

  queue::QueueHeader* header() {
    return static_cast<queue::QueueHeader*>(base_);
  }
  queue::SubmissionEntry* submissions() {
    return reinterpret_cast<queue::SubmissionEntry*>(
        static_cast<char*>(base_) + header()->sq_offset);
  }
  absl::Status RingDoorbell() {
    const uint64_t one = 1;
    if (::write(doorbell_.get(), &one, sizeof(one)) != sizeof(one)) {
      return absl::ErrnoToStatus(errno, "write to the doorbell");
    }
    return absl::OkStatus();
  }
  absl::Status StopStatus() const { return queue::StopStatus(base_); }
  RawSession& session() { return *session_; }

 private:
  HostileQueue(std::unique_ptr<RawSession> session, UniqueFd doorbell,
               void* base, size_t size)
      : session_(std::move(session)),
        doorbell_(std::move(doorbell)),
        base_(base),
        size_(size) {}

  std::unique_ptr<RawSession> session_;
  UniqueFd doorbell_;
  void* const base_;
  const size_t size_;
};

class QueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartDaemon(dir_, "a", &a_));
    ASSERT_NO_FATAL_FAILURE(StartDaemon(dir_, "b", &b_));
  }

  // After a hostile queue of A stopped: A still serves its other sessions
  // (`ca`, whose region "t" this writes).
  static void ExpectTheSessionCarriesOn(Client& ca) {
    auto buf = ca.Allocate(4096);
    ASSERT_TRUE(buf.ok());
    EXPECT_TRUE(ca.Write(*buf, 0, *RemoteRegion::Parse("t"), 0, 100).ok());
    auto status = ca.GetStatus();
    EXPECT_TRUE(status.ok()) << status.status();
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> a_, b_;
};

TEST_F(QueueTest, ThreadsAndProcessesGetByteIdenticalResults) {
  constexpr int kProcesses = 3;
  constexpr int kThreads = 4;
  // Small enough for the stock 8 MiB locked-memory limit.
  constexpr uint64_t kSlice = 256 * 1024;
  auto cb = Connect(*b_);
  ASSERT_TRUE(cb);
  ASSERT_TRUE(cb->CreateRegion("shared", (kProcesses + kThreads) * kSlice,
                               Access::kReadWrite)
                  .ok());
  const std::string address = absl::StrCat(b_->peer_address(), "/shared");
  // Other processes, each with its session and queue.
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int p = 0; p < kProcesses; ++p) {
    auto child = ChildProcess::Spawn(
        {QUEUE_CLIENT_PATH, a_->socket(), address,
         std::to_string(p * kSlice), std::to_string(kSlice),
         std::to_string(100 + p), "verify"},
        absl::StrCat(dir_.path(), "/client", p, ".log"));
    ASSERT_TRUE(child.ok()) << child.status();
    children.push_back(*std::move(child));
  }
  // Threads of this process, each with a queue of its own.
  auto ca = Connect(*a_);
  ASSERT_TRUE(ca);
  auto remote = ca->OpenRemote(*RemoteRegion::Parse(address));
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ(remote->size(), (kProcesses + kThreads) * kSlice);
  EXPECT_EQ(remote->access(), Access::kReadWrite);
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto queue = ca->OpenQueue({.depth = 32});
      ASSERT_TRUE(queue.ok()) << queue.status();
      auto out = ca->Allocate(kSlice);
      auto in = ca->Allocate(kSlice);
      ASSERT_TRUE(out.ok() && in.ok());
      Fill(out->data(), kSlice, 200 + t);
      const uint64_t base = (kProcesses + t) * kSlice;
      for (bool write : {true, false}) {
        std::vector<Op> ops;
        for (uint64_t at = 0; at < kSlice; at += 8192) {
          ops.push_back({.kind = write ? Op::Kind::kWrite : Op::Kind::kRead,
                         .local = write ? &*out : &*in,
                         .local_offset = at,
                         .remote = &*remote,
                         .remote_offset = base + at,
                         .length = 8192,
                         .tag = at});
        }
        for (const Completion& c : RunAll(**queue, ops)) {
          if (!c.status.ok() || c.bytes != 8192) ++failures[t];
        }
      }
      if (std::memcmp(out->data(), in->data(), kSlice) != 0) ++failures[t];
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  for (int p = 0; p < kProcesses; ++p) {
    auto status = children[p]->Wait(absl::Seconds(120));
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << "client process " << p << " failed: "
        << ReadTextFile(absl::StrCat(dir_.path(), "/client", p, ".log"));
  }
  // Everyone's bytes, as B holds them.
  auto view = cb->MapRegion("shared");
  ASSERT_TRUE(view.ok()) << view.status();
  std::string want(kSlice, '\0');
  for (int s = 0; s < kProcesses + kThreads; ++s) {
    Fill(want.data(), kSlice, s < kProcesses ? 100 + s : 200 + (s - kProcesses));
    EXPECT_EQ(std::memcmp(view->data() + s * kSlice, want.data(), kSlice), 0)
        << "slice " << s;
  }
}

TEST_F(QueueTest, NotificationsReachTheOwnerOfTheRegion) {
  auto cb = Connect(*b_);
  ASSERT_TRUE(cb);
  auto inbox = cb->CreateRegion("inbox", 64 * 1024, Access::kReadWrite);
  ASSERT_TRUE(inbox.ok()) << inbox.status();
  auto notes = cb->OpenQueue({.notifications = true});
  ASSERT_TRUE(notes.ok()) << notes.status();
  EXPECT_EQ(cb->OpenQueue({.notifications = true}).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "one notification queue per session";

  auto ca = Connect(*a_);
  ASSERT_TRUE(ca);
  auto queue = ca->OpenQueue();
  ASSERT_TRUE(queue.ok());
  auto remote = ca->OpenRemote(
      *RemoteRegion::Parse(absl::StrCat(b_->peer_address(), "/inbox")));
  ASSERT_TRUE(remote.ok()) << remote.status();
  auto buf = ca->Allocate(4096);
  ASSERT_TRUE(buf.ok());
  std::memcpy(buf->data(), "hello, inbox", 12);
  // Nothing written yet: a wait with a timeout ends DEADLINE_EXCEEDED.
  EXPECT_EQ((*notes)->Wait(absl::Milliseconds(20)).code(),
            absl::StatusCode::kDeadlineExceeded);
  std::vector<Op> ops = {{.kind = Op::Kind::kWrite, .local = &*buf,
                          .remote = &*remote, .remote_offset = 4096,
                          .length = 12, .tag = 5, .immediate = 0xfeed}};
  std::vector<Completion> done = RunAll(**queue, ops);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(done[0].status.ok()) << done[0].status;
  // In the lab this runs over verbs, where the notification is a notice
  // behind the RDMA WRITE (daemon/transport/verbs/verbs_notice.h).
  EXPECT_EQ(done[0].transport,
            TestTransport() == "verbs" ? Transport::kVerbs : Transport::kTcp);

  ASSERT_TRUE((*notes)->Wait(absl::Now() + absl::Seconds(30)).ok());
  Completion note[4];
  ASSERT_EQ((*notes)->Poll(absl::MakeSpan(note)), 1u);
  EXPECT_EQ(note[0].kind, Completion::Kind::kNotification);
  EXPECT_EQ(note[0].region, inbox->id);
  EXPECT_EQ(note[0].offset, 4096u);
  EXPECT_EQ(note[0].bytes, 12u);
  EXPECT_EQ(note[0].immediate, 0xfeedu);
  // Who wrote: the other daemon, as it named itself; no local uid.
  EXPECT_EQ(note[0].writer, a_->peer_address());
  EXPECT_FALSE(note[0].writer_uid.has_value());
  EXPECT_EQ(note[0].transport, done[0].transport);
  auto view = cb->MapRegion("inbox");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(std::string(view->data() + 4096, 12), "hello, inbox")
      << "the data is in place before the notification";

  // From a client of the same daemon: a local copy, the same notification.
  auto local = cb->OpenRemote(*RemoteRegion::Parse("inbox"));
  ASSERT_TRUE(local.ok()) << local.status();
  auto other = cb->OpenQueue();
  ASSERT_TRUE(other.ok());
  auto src = cb->Allocate(4096);
  ASSERT_TRUE(src.ok());
  ops = {{.kind = Op::Kind::kWrite, .local = &*src, .remote = &*local,
          .remote_offset = 0, .length = 100, .immediate = 7}};
  done = RunAll(**other, ops);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
  EXPECT_EQ(done[0].transport, Transport::kLocal);
  ASSERT_TRUE((*notes)->Wait(absl::Seconds(30)).ok());
  ASSERT_EQ((*notes)->Poll(absl::MakeSpan(note)), 1u);
  EXPECT_EQ(note[0].immediate, 7u);
  EXPECT_EQ(note[0].bytes, 100u);
  // A local writer: this daemon, and the writer's uid as the kernel said.
  EXPECT_EQ(note[0].writer, b_->peer_address());
  EXPECT_EQ(note[0].writer_uid, ::getuid());
  EXPECT_EQ(note[0].transport, Transport::kLocal);

  // Only a WRITE carries an immediate.
  ops = {{.kind = Op::Kind::kRead, .local = &*src, .remote = &*local,
          .length = 8, .immediate = 1}};
  EXPECT_EQ((*other)->Submit(ops).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// What an operator sees (Client::ListQueues, `rdmactl queues`): each queue
// with its process, what went through it, and why a stopped one stopped.
TEST_F(QueueTest, ListQueuesShowsCountsAndWhyAQueueStopped) {
  auto owner = Connect(*b_);
  ASSERT_TRUE(owner);
  ASSERT_TRUE(owner->CreateRegion("inbox", 64 * 1024, Access::kReadWrite).ok());
  auto notes = owner->OpenQueue(
      {.depth = 8, .completion_depth = 8, .notifications = true});
  ASSERT_TRUE(notes.ok()) << notes.status();
  auto writer = owner->OpenQueue();
  ASSERT_TRUE(writer.ok());
  auto inbox = owner->OpenRemote(*RemoteRegion::Parse("inbox"));
  ASSERT_TRUE(inbox.ok()) << inbox.status();
  auto buf = owner->Allocate(4096);
  ASSERT_TRUE(buf.ok());
  // Ten WRITEs with an immediate and two that fail: four notifications go
  // on the notification queue nobody polls (half its ring), six wait.
  for (uint32_t i = 0; i < 12; ++i) {
    const uint64_t at = i < 10 ? i * 64 : 1 << 20;  // the last two: outside
    std::vector<Op> ops = {{.kind = Op::Kind::kWrite, .local = &*buf,
                            .remote = &*inbox, .remote_offset = at,
                            .length = 64, .tag = i, .immediate = i}};
    ASSERT_EQ(RunAll(**writer, ops).size(), 1u);
  }
  // A queue whose client scribbled on its ring stops, saying why.
  auto hostile = HostileQueue::Open(b_->socket());
  ASSERT_TRUE(hostile.ok()) << hostile.status();
  (*hostile)->submissions()[0].sequence = 12345;
  ASSERT_TRUE((*hostile)->RingDoorbell().ok());

  const QueueInfo* stopped = nullptr;
  const QueueInfo* busy = nullptr;
  const QueueInfo* notified = nullptr;
  absl::StatusOr<std::vector<QueueInfo>> queues;
  ASSERT_TRUE(Eventually([&] {
    stopped = busy = notified = nullptr;
    queues = owner->ListQueues();
    if (!queues.ok()) return false;
    for (const QueueInfo& q : *queues) {
      if (q.id == (*notes)->id()) notified = &q;
      if (q.id == (*writer)->id()) busy = &q;
      if (!q.stop_reason.ok()) stopped = &q;
    }
    return stopped != nullptr;
  })) << "the scribbled queue stops";
  ASSERT_NE(busy, nullptr);
  ASSERT_NE(notified, nullptr);
  EXPECT_EQ(busy->pid, ::getpid());
  EXPECT_EQ(busy->uid, ::getuid());
  EXPECT_EQ(busy->session_id, notified->session_id);
  EXPECT_FALSE(busy->engine.empty());
  EXPECT_GT(busy->submission_entries, 0u);
  EXPECT_EQ(busy->submitted, 12u);
  EXPECT_EQ(busy->completed, 12u);
  EXPECT_EQ(busy->failed, 2u);
  EXPECT_EQ(busy->in_flight, 0u);
  EXPECT_TRUE(busy->stop_reason.ok()) << busy->stop_reason;
  EXPECT_LE(busy->opened, absl::Now());
  EXPECT_GT(busy->opened, absl::Now() - absl::Minutes(5));
  EXPECT_TRUE(notified->notifications);
  EXPECT_EQ(notified->submission_entries, 8u);
  EXPECT_EQ(notified->notified, 4u);
  EXPECT_EQ(notified->notifications_held, 6u);
  EXPECT_EQ(notified->notifications_lost, 0u);
  EXPECT_TRUE(notified->stop_reason.ok())
      << "notifications never stop a queue: " << notified->stop_reason;
  EXPECT_EQ(stopped->stop_reason.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(stopped->stop_reason, (*hostile)->StopStatus())
      << "the reason the client itself reads";

  // Closed: no longer listed.
  const uint64_t closed = (*notes)->id();
  notes->reset();
  queues = owner->ListQueues();
  ASSERT_TRUE(queues.ok());
  for (const QueueInfo& q : *queues) EXPECT_NE(q.id, closed);
}

TEST_F(QueueTest, ListQueuesComesInPages) {
  auto client = Connect(*b_);
  ASSERT_TRUE(client);
  std::vector<std::unique_ptr<Queue>> queues;
  for (int i = 0; i < 5; ++i) {
    auto q = client->OpenQueue({.depth = 8});
    ASSERT_TRUE(q.ok()) << q.status();
    queues.push_back(*std::move(q));
  }
  auto raw = RawSession::Open(b_->socket());
  ASSERT_TRUE(raw.ok()) << raw.status();
  std::vector<uint64_t> seen;
  v1::ListQueuesRequest request;
  request.set_page_size(2);
  int pages = 0;
  do {
    grpc::ClientContext context;
    (*raw)->Authorize(&context);
    v1::ListQueuesResponse response;
    ASSERT_TRUE((*raw)->stub().ListQueues(&context, request, &response).ok());
    EXPECT_LE(response.queues_size(), 2);
    for (const v1::QueueInfo& q : response.queues()) seen.push_back(q.queue_id());
    request.set_page_token(response.next_page_token());
    ASSERT_LT(++pages, 10);
  } while (!request.page_token().empty());
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(seen.size(), 5u) << "another session of the same uid sees them";
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], queues[i]->id());
  auto all = client->ListQueues();  // the library follows the pages
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 5u);
}

// QueueOptions::spin: bounded, and 0 means a Wait sleeps at once (it
// still sees every completion, through the wake-up eventfd). A
// default_timeout must be more than 0.
TEST_F(QueueTest, SpinIsBoundedAndZeroWaitsAsleep) {
  auto ca = Connect(*a_);
  ASSERT_TRUE(ca);
  auto negative = ca->OpenQueue({.spin = absl::Microseconds(-1)});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.status().message(), HasSubstr("QueueOptions::spin"));
  EXPECT_EQ(ca->OpenQueue({.spin = absl::Seconds(2)}).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Op::timeout 0 means the queue's default; a default of 0 meant 1 ms
  // for every op (a probe's 1 MiB WRITE failed DEADLINE_EXCEEDED).
  for (absl::Duration timeout : {absl::ZeroDuration(), absl::Seconds(-1)}) {
    auto refused = ca->OpenQueue({.default_timeout = timeout});
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument)
        << timeout;
    EXPECT_THAT(refused.status().message(),
                HasSubstr("QueueOptions::default_timeout"));
  }

  // A spin longer than the wait ends at the wait's deadline. (These
  // queues take notifications: a Wait on them may find nothing and time
  // out, where one with nothing that could complete answers at once.)
  auto spinner =
      ca->OpenQueue({.notifications = true, .spin = absl::Seconds(1)});
  ASSERT_TRUE(spinner.ok()) << spinner.status();
  const absl::Time start = absl::Now();
  EXPECT_EQ((*spinner)->Wait(absl::Milliseconds(20)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(900))
      << "the 1s spin outlived the 20ms wait";
  spinner->reset();  // one queue of a session takes notifications

  auto queue =
      ca->OpenQueue({.notifications = true, .spin = absl::ZeroDuration()});
  ASSERT_TRUE(queue.ok()) << queue.status();
  // A Wait with nothing in flight uses (next to) no CPU: it never spins.
  timespec before{}, after{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &before);
  EXPECT_EQ((*queue)->Wait(absl::Milliseconds(300)).code(),
            absl::StatusCode::kDeadlineExceeded);
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &after);
  const absl::Duration cpu =
      absl::DurationFromTimespec(after) - absl::DurationFromTimespec(before);
  EXPECT_LT(cpu, absl::Milliseconds(100)) << "a Wait with spin 0 spun";

  auto region = ca->CreateRegion("spin-target", 4096, Access::kReadWrite);
  ASSERT_TRUE(region.ok()) << region.status();
  auto target = ca->OpenRemote(*RemoteRegion::Parse("spin-target"));
  ASSERT_TRUE(target.ok()) << target.status();
  auto buf = ca->Allocate(4096);
  ASSERT_TRUE(buf.ok());
  std::vector<Op> ops;
  for (uint64_t i = 0; i < 50; ++i) {
    ops.push_back({.kind = Op::Kind::kWrite, .local = &*buf,
                   .local_offset = i * 8, .remote = &*target,
                   .remote_offset = i * 8, .length = 8, .tag = i});
  }
  std::memset(buf->data(), 0x5a, 4096);
  std::vector<Completion> done = RunAll(**queue, ops);
  ASSERT_EQ(done.size(), ops.size());
  for (const Completion& c : done) EXPECT_TRUE(c.status.ok()) << c.status;
  auto view = ca->MapRegion("spin-target");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(std::string(view->data(), 400), std::string(400, '\x5a'));
}

// The thread of process `pid` named `name` (its comm), or -1.
pid_t FindThread(pid_t pid, const std::string& name) {
  const std::string dir = absl::StrCat("/proc/", pid, "/task");
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return -1;
  pid_t found = -1;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(absl::StrCat(dir, "/", e->d_name, "/comm"));
    std::string line;
    if (std::getline(comm, line) && line == name) {
      found = static_cast<pid_t>(std::stol(e->d_name));
      break;
    }
  }
  ::closedir(d);
  return found;
}

// The CPU thread `tid` of `pid` last ran on (field 39 of its stat), or -1.
int ThreadCpu(pid_t pid, pid_t tid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/task/", tid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(stat.substr(paren + 2));  // from field 3 on
  std::string field;
  for (int i = 3; i <= 39 && fields >> field; ++i) {
    if (i == 39) return std::stoi(field);
  }
  return -1;
}

bool PinThread(pid_t tid, std::initializer_list<int> cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  return ::sched_setaffinity(tid, sizeof(set), &set) == 0;
}

// A client on the engine's CPU polls between yields and the engine yields
// back (common/queue_layout.h); then the engine moves to a CPU of its own
// (daemon/ring/cpu_step_aside.h). Before, the client slept and the
// scheduler kept waking each on the other's CPU: every op paid two
// wake-ups (8-10 us instead of 0.4) for as long as the client ran.
TEST_F(QueueTest, AClientOnTheEnginesCpuIsServedAndTheEngineStepsAside) {
  cpu_set_t saved;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(saved), &saved), 0);
  const int here = ::sched_getcpu();
  int other = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE && other < 0; ++cpu) {
    if (cpu != here && CPU_ISSET(cpu, &saved)) other = cpu;
  }
  if (other < 0) GTEST_SKIP() << "this test may use one CPU only";
  const pid_t engine = FindThread(a_->pid(), "rdmad-io0");
  ASSERT_GT(engine, 0) << "no engine thread rdmad-io0 in rdmad";
  ASSERT_TRUE(PinThread(0, {here}));
  ASSERT_TRUE(PinThread(engine, {here}));

  auto ca = Connect(*a_);
  ASSERT_TRUE(ca);
  ASSERT_TRUE(ca->CreateRegion("cpu-target", 64 * 1024, Access::kReadWrite).ok());
  auto target = ca->OpenRemote(*RemoteRegion::Parse("cpu-target"));
  ASSERT_TRUE(target.ok()) << target.status();
  auto buf = ca->Allocate(64 * 1024);
  ASSERT_TRUE(buf.ok());
  Fill(buf->data(), 64 * 1024, 31);
  auto queue = ca->OpenQueue({.depth = 8});
  ASSERT_TRUE(queue.ok()) << queue.status();
  // One op at a time, as a latency-bound client runs them.
  auto run = [&](uint64_t first, uint64_t count) {
    for (uint64_t i = first; i < first + count; ++i) {
      std::vector<Op> op{{.kind = Op::Kind::kWrite, .local = &*buf,
                          .local_offset = (i * 8) % (64 * 1024),
                          .remote = &*target,
                          .remote_offset = (i * 8) % (64 * 1024),
                          .length = 8, .tag = i}};
      std::vector<Completion> done = RunAll(**queue, op);
      if (done.size() != 1 || !done[0].status.ok() || done[0].tag != i) {
        ADD_FAILURE() << "op " << i << " did not complete";
        return;
      }
    }
  };
  // Both held on one CPU: served by yielding, not stuck.
  run(0, 2000);
  EXPECT_EQ(ThreadCpu(a_->pid(), engine), here);
  // Held there, the engine tried to step aside and backed off (the
  // pauses between tries double while it does not sleep): let it sleep,
  // and wake it on `here` with one op.
  absl::SleepFor(absl::Milliseconds(50));
  run(2000, 1);
  // The engine may go elsewhere now: it steps aside after some 64 ops.
  // (The scheduler's load balancing moves one of the two as well, but
  // only after 15-20 ms or so: 2700 to 4000 ops when measured.)
  ASSERT_TRUE(PinThread(engine, {here, other}));
  const int64_t migrations_before = ThreadMigrations(a_->pid(), engine);
  // It steps aside after 64 yields to its client within 20 ms
  // (cpu_step_aside.h): a batch of 100 ops, each served by a yield, faster
  // than 100 * 20 / 64 ms meets that on average, and at twice that rate
  // in any of the rule's fixed windows. Only such batches count, and only
  // those that the queue's counters show were served by yields: no
  // doorbell rung (the engine did not sleep) and no wake-up written (the
  // client did not sleep). The pair also settles into ways of sharing
  // the CPU that the rule leaves alone: once each side's spin has closed
  // because the other preempted it (common/spin_gate.h), the engine
  // sleeps after every op and the client's doorbell wakes it (100
  // doorbells per 100 ops, 8.5 us each), or the client sleeps and the
  // engine wakes it (100 wake-ups). Moving the engine away then made each
  // op a wake-up across CPUs, 50-80 us. On a machine so loaded that ops
  // take longer (a sanitizer build beside a compiler on both CPUs: 2 ms
  // each once), the rule does not apply either, and only "served, not
  // stuck" is checked.
  // And it tries only once the pause after its last try is over: its
  // failed tries while pinned doubled that pause, up to
  // CpuStepAside::kMaxPause (1 s), and the 50 ms sleep may not have ended
  // it. So batches are run for that long at least, and only those after it
  // count (a bound in ops alone was too short once ops got faster: 1000
  // of them took less than a doubled pause).
  constexpr absl::Duration kFastBatch =
      absl::Microseconds(100 * 20000 / 64 / 2);
  constexpr absl::Duration kMaxPause = absl::Seconds(1);
  // The queue's doorbells and client wake-ups so far.
  auto wakeups = [&]() -> uint64_t {
    const QueueInfo q = ListedQueue(*ca, (*queue)->id());
    return q.doorbells + q.client_wakeups;
  };
  const absl::Time began = absl::Now();
  uint64_t next = 2001;
  uint64_t fast_batches = 0;
  while (ThreadCpu(a_->pid(), engine) == here &&
         absl::Now() - began < kMaxPause + absl::Milliseconds(500) &&
         !HasFailure()) {
    const uint64_t wakeups_before = wakeups();
    const absl::Time start = absl::Now();
    run(next, 100);
    const absl::Duration took = absl::Now() - start;
    const bool yielding = wakeups() - wakeups_before < 10;
    if (start - began > kMaxPause && took < kFastBatch && yielding) {
      ++fast_batches;
    }
    next += 100;
  }
  // A busy machine's load balancer may put an engine that stepped aside
  // back on `here` (the other CPU runs a compiler): it did move, and
  // where it runs after that is the scheduler's choice.
  const int64_t migrations_after = ThreadMigrations(a_->pid(), engine);
  const bool moved = migrations_before >= 0 &&
                     migrations_after > migrations_before;
  if (ThreadCpu(a_->pid(), engine) == here && !moved) {
    EXPECT_EQ(fast_batches, 0u)
        << "the engine stayed on its client's CPU for " << next - 2001
        << " ops, " << fast_batches
        << " batches of 100 of them, after its longest pause, served by "
           "more than 128 yields per 20 ms (migrations "
        << migrations_before << " -> " << migrations_after << ")";
  } else if (!moved) {
    EXPECT_EQ(ThreadCpu(a_->pid(), engine), other);
  }
  run(next, 2000);
  next += 2000;
  ASSERT_EQ(::sched_setaffinity(0, sizeof(saved), &saved), 0);
  auto view = ca->MapRegion("cpu-target");
  ASSERT_TRUE(view.ok()) << view.status();
  const uint64_t written = std::min<uint64_t>(next * 8, 64 * 1024);
  EXPECT_EQ(std::memcmp(view->data(), buf->data(), written), 0);
}

// A Queue may outlive the Client that opened it: it keeps the session
// open, and closing it ends both. A probe that destroyed the Client first
// crashed (valgrind: the Queue's status() and destructor read the freed
// Client).
TEST_F(QueueTest, AQueueMayOutliveItsClient) {
  auto ca = Connect(*a_);
  ASSERT_TRUE(ca);
  auto queue = ca->OpenQueue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  ca.reset();
  EXPECT_TRUE((*queue)->status().ok()) << (*queue)->status();
  EXPECT_TRUE((*queue)->Arm()) << "the session is open: it may be armed";
  Completion done[1];
  EXPECT_EQ((*queue)->Poll(done), 0u);
  auto other = Connect(*a_);
  ASSERT_TRUE(other);
  auto status = other->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->session_count, 2u) << "the queue keeps its session";
  queue->reset();
  EXPECT_TRUE(Eventually([&] {
    auto now = other->GetStatus();
    return now.ok() && now->session_count == 1;
  })) << "the session outlived its last queue";
}

// A refused Submit names the op and what is wrong with it. A probe that
// submitted a batch naming a Buffer it had moved into another variable got
// "an operation's local buffer is missing or belongs to another client":
// neither which op of the batch, nor the likelier cause.
TEST_F(QueueTest, SubmitNamesTheOperationItRefuses) {
  auto ca = Connect(*a_);
  ASSERT_TRUE(ca);
  ASSERT_TRUE(ca->CreateRegion("t", 4096, Access::kReadWrite).ok());
  auto target = ca->OpenRemote(*RemoteRegion::Parse("t"));
  ASSERT_TRUE(target.ok()) << target.status();
  auto queue = ca->OpenQueue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  auto buf = ca->Allocate(4096);
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto moved_from = ca->Allocate(4096);
  ASSERT_TRUE(moved_from.ok()) << moved_from.status();
  Buffer kept = *std::move(moved_from);
  std::vector<Op> ops = {
      {.local = &*buf, .remote = &*target, .length = 8, .tag = 40},
      {.local = &*moved_from, .remote = &*target, .length = 8, .tag = 41}};
  auto refused = (*queue)->Submit(ops);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("operation 1 (tag 41) of 2, nothing queued"));
  EXPECT_THAT(refused.status().message(), HasSubstr("released or moved from"));
  EXPECT_EQ((*queue)->in_flight(), 0u);

  ops[1] = {.local = &kept, .length = 8, .tag = 42};
  refused = (*queue)->Submit(ops);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("operation 1 (tag 42) of 2, nothing queued: it names "
                        "no remote handle"));
}

// What a program meets first, said for a program: Wait with nothing to
// wait for answers at once; a name nobody exports points at the library's
// calls too, not only rdmactl's; an address nobody answers at says to check
// it.
TEST_F(QueueTest, MistakesAreExplainedForAProgram) {
  auto ca = Connect(*a_);
  ASSERT_TRUE(ca);
  auto queue = ca->OpenQueue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  const absl::Time start = absl::Now();
  const absl::Status idle = (*queue)->Wait(absl::Seconds(60));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "slept to the deadline";
  EXPECT_EQ(idle.code(), absl::StatusCode::kFailedPrecondition) << idle;
  EXPECT_THAT(idle.message(), HasSubstr("nothing is in flight"));

  auto missing = ca->OpenRemote(*RemoteRegion::Parse(
      absl::StrCat(b_->peer_address(), "/nobody-exports-this")));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("Client::Export"));

  // A port nobody listens on: bound by the kernel's choice, then closed.
  int closed_port = 0;
  {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    closed_port = ntohs(addr.sin_port);
    ::close(fd);
  }
  auto unreachable = ca->OpenRemote(*RemoteRegion::Parse(
      absl::StrCat("127.0.0.1:", closed_port, "/kv")));
  EXPECT_EQ(unreachable.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(unreachable.status().message(), HasSubstr("Check the address"));
}

TEST_F(QueueTest, AClientKilledWithOperationsInFlightLeavesOthersAlone) {
  auto cb = Connect(*b_);
  ASSERT_TRUE(cb);
  ASSERT_TRUE(cb->CreateRegion("r", 8 * kMiB, Access::kReadWrite).ok());
  const std::string address = absl::StrCat(b_->peer_address(), "/r");
  auto ca = Connect(*a_);
  ASSERT_TRUE(ca);
  auto buf = ca->Allocate(4096);
  ASSERT_TRUE(buf.ok());
  // Connected and resolved: the client below finds the name in A's cache;
  // and a batch spread over every data connection, so that all are open
  // before the descriptors are counted.
  const RemoteRegion region = *RemoteRegion::Parse(address);
  const std::vector<Op> warm(
      64, Op{.local = &*buf, .remote = &region, .length = 4096});
  auto warmed = ca->Batch(warm);
  ASSERT_TRUE(warmed.ok()) << warmed.status();
  const int fds_before = OpenFds(a_->pid());
  auto regions_before = ca->ListRegions();
  ASSERT_TRUE(regions_before.ok());

  // B stops answering: what the client submits stays in flight.
  EXPECT_TRUE(b_->Pause()) << "B did not stop";
  auto child = ChildProcess::Spawn(
      {QUEUE_CLIENT_PATH, a_->socket(), address, "0",
       std::to_string(1 * kMiB), "1", "hang"},
      absl::StrCat(dir_.path(), "/hang.log"));
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(Eventually([&] {
    auto regions = ca->ListRegions();
    return regions.ok() &&
           regions->size() == regions_before->size() + 2;
  })) << "the client never got its buffers";
  absl::SleepFor(absl::Milliseconds(500));  // its ops reach the channel
  (*child)->Signal(SIGKILL);
  ASSERT_TRUE((*child)->Wait(absl::Seconds(10)).ok());

  // A goes on: its other clients are served while B is stopped...
  auto view = ca->CreateRegion("here", 4096, Access::kReadWrite);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(ca->Write(*buf, 0, *RemoteRegion::Parse("here"), 0, 64).ok());
  // ...and the dead client's buffers are gone.
  EXPECT_TRUE(Eventually([&] {
    auto regions = ca->ListRegions();
    return regions.ok() &&
           regions->size() == regions_before->size() + 1;
  }));
  b_->Resume();
  // Once B answers, the in-flight operations end and nothing is left open.
  ASSERT_TRUE(ca->FreeRegion("here").ok());
  EXPECT_TRUE(Eventually([&] { return OpenFds(a_->pid()) <= fds_before; },
                         absl::Seconds(60)))
      << "A holds " << OpenFds(a_->pid()) << " descriptors, had "
      << fds_before;
  EXPECT_TRUE(ca->Write(*buf, 0, *RemoteRegion::Parse(address), 0, 8).ok());
}

TEST_F(QueueTest, AScribbledRingStopsOnlyItsQueue) {
  auto ca = Connect(*a_);
  ASSERT_TRUE(ca);
  ASSERT_TRUE(ca->CreateRegion("t", 4096, Access::kReadWrite).ok());
  auto hostile = HostileQueue::Open(a_->socket());
  ASSERT_TRUE(hostile.ok()) << hostile.status();
  // The first entry's slot gets a sequence no entry of it can have.
  (*hostile)->submissions()[0].sequence = 123456;
  ASSERT_TRUE((*hostile)->RingDoorbell().ok());
  EXPECT_TRUE(Eventually([&] { return !(*hostile)->StopStatus().ok(); }));
  const absl::Status stopped = (*hostile)->StopStatus();
  EXPECT_EQ(stopped.code(), absl::StatusCode::kDataLoss) << stopped;
  EXPECT_THAT(stopped.message(), HasSubstr("submission ring"));
  ExpectTheSessionCarriesOn(*ca);
}

TEST_F(QueueTest, AScribbledTailStopsItsQueueBeforeTheEngineSleeps) {
  auto ca = Connect(*a_);
  ASSERT_TRUE(ca);
  ASSERT_TRUE(ca->CreateRegion("t", 4096, Access::kReadWrite).ok());
  auto hostile = HostileQueue::Open(a_->socket());
  ASSERT_TRUE(hostile.ok()) << hostile.status();
  // A tail far ahead of anything written. The engine goes by the entries'
  // sequences while awake and reads the tail only before it sleeps (after
  // its spin): then it stops the queue, without a doorbell.
  (*hostile)->header()->sq_tail.store(123456);
  EXPECT_TRUE(Eventually([&] { return !(*hostile)->StopStatus().ok(); }));
  const absl::Status stopped = (*hostile)->StopStatus();
  EXPECT_EQ(stopped.code(), absl::StatusCode::kDataLoss) << stopped;
  EXPECT_THAT(stopped.message(), HasSubstr("submission ring's tail (123456)"));
  ExpectTheSessionCarriesOn(*ca);
}

TEST_F(QueueTest, ASessionEndedForHoardingDescriptorsLosesItsQueues) {
  auto ca = Connect(*a_);
  ASSERT_TRUE(ca);
  ASSERT_TRUE(ca->CreateRegion("t", 4096, Access::kReadWrite).ok());
  auto hostile = HostileQueue::Open(a_->socket());
  ASSERT_TRUE(hostile.ok()) << hostile.status();
  ASSERT_EQ(QueueSegments(a_->pid()), 1);
  RawSession& session = (*hostile)->session();
  uint64_t buffer = 0;
  {
    grpc::ClientContext context;
    session.Authorize(&context);
    v1::AllocateBufferRequest request;
    request.set_size(4096);
    v1::AllocateBufferResponse response;
    ASSERT_TRUE(session.stub().AllocateBuffer(&context, request, &response).ok());
    buffer = response.region().id();
  }
  // Descriptors asked for and never received, until the daemon ends the
  // session (16 may be in flight).
  for (int i = 0; i < 64; ++i) {
    if (!session.AskFd(buffer).ok()) break;
  }
  EXPECT_TRUE(Eventually([&] {
    grpc::ClientContext context;
    session.Authorize(&context);
    v1::GetStatusResponse status;
    return session.stub()
               .GetStatus(&context, v1::GetStatusRequest(), &status)
               .error_code() == grpc::StatusCode::UNAUTHENTICATED;
  })) << a_->LogTail();

  // Its queue went with it: stopped, and its segment closed in the daemon,
  // so nothing submitted on it now is served after the session's end.
  EXPECT_TRUE(Eventually([&] { return !(*hostile)->StopStatus().ok(); }));
  const absl::Status stopped = (*hostile)->StopStatus();
  EXPECT_EQ(stopped.code(), absl::StatusCode::kCancelled) << stopped;
  EXPECT_THAT(stopped.message(), HasSubstr("the session ended"));
  EXPECT_TRUE(Eventually([&] { return QueueSegments(a_->pid()) == 0; }))
      << QueueSegments(a_->pid()) << " queue segments still open in A";
  ExpectTheSessionCarriesOn(*ca);
}

}  // namespace
}  // namespace rdmad::testing
