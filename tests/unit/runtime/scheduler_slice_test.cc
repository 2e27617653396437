// RequestSchedulerSlice: the calling thread's time slice changes and its
// nice value does not; an event loop asks for its own slice when it
// starts.
#include "daemon/runtime/scheduler_slice.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

#include "daemon/runtime/event_loop.h"
#include "gtest/gtest.h"

namespace rdmad::runtime {
namespace {

int ThreadNice() {
  errno = 0;
  return ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
}

TEST(SchedulerSliceTest, ChangesTheSliceAndKeepsTheNiceValue) {
  std::thread([] {
    ASSERT_EQ(::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 5),
              0);
    ASSERT_TRUE(RequestSchedulerSlice(absl::Microseconds(300)).ok());
    auto slice = SchedulerSlice();
    ASSERT_TRUE(slice.ok()) << slice.status();
    EXPECT_EQ(*slice, absl::Microseconds(300));
    EXPECT_EQ(ThreadNice(), 5) << "only the slice changes";
    // Outside the kernel's range: clamped to it.
    ASSERT_TRUE(RequestSchedulerSlice(absl::Microseconds(1)).ok());
    EXPECT_EQ(*SchedulerSlice(), kMinSchedulerSlice);
  }).join();
}

TEST(SchedulerSliceTest, AnEventLoopAsksForItsSlice) {
  auto loop = EventLoop::Create(
      "slice-loop", {.spin = absl::ZeroDuration(),
                     .slice = absl::Microseconds(200)});
  ASSERT_TRUE(loop.ok()) << loop.status();
  (*loop)->Start();
  absl::StatusOr<absl::Duration> slice = absl::InternalError("not run");
  ASSERT_TRUE(RunOnLoop(loop->get(), [&] {
                slice = SchedulerSlice();
                return absl::OkStatus();
              }).ok());
  (*loop)->Stop();
  ASSERT_TRUE(slice.ok()) << slice.status();
  EXPECT_EQ(*slice, absl::Microseconds(200));
}

}  // namespace
}  // namespace rdmad::runtime
