// PortMonitor (daemon/transport/verbs/port_monitor.h) without a device:
// who is told of a QP's IBV_EVENT_QP_LAST_WQE_REACHED, and of a port's
// change.
#include "daemon/transport/verbs/port_monitor.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace rdmad::verbs {
namespace {

TEST(PortMonitorTest, LastWqeReachesOnlyItsQpsWatcherOnce) {
  PortMonitor monitor;
  int reached_7 = 0;
  int reached_8 = 0;
  monitor.WatchLastWqe("rxe0", 7, [&reached_7] { ++reached_7; });
  monitor.WatchLastWqe("rxe0", 8, [&reached_8] { ++reached_8; });
  monitor.ReportLastWqe("rxe1", 7);  // same number, another device
  monitor.ReportLastWqe("rxe0", 9);  // nobody waits for it
  EXPECT_EQ(reached_7, 0);
  monitor.ReportLastWqe("rxe0", 7);
  monitor.ReportLastWqe("rxe0", 7);
  EXPECT_EQ(reached_7, 1);
  EXPECT_EQ(reached_8, 0);
}

TEST(PortMonitorTest, AnUnwatchedQpIsNotReported) {
  PortMonitor monitor;
  int reached = 0;
  monitor.WatchLastWqe("rxe0", 7, [&reached] { ++reached; });
  monitor.UnwatchLastWqe("rxe0", 7);
  monitor.UnwatchLastWqe("rxe0", 8);  // never watched: no-op
  monitor.ReportLastWqe("rxe0", 7);
  EXPECT_EQ(reached, 0);
}

TEST(PortMonitorTest, AWatcherMayUnwatchOthersFromItsCallback) {
  PortMonitor monitor;
  int reached = 0;
  // Called without the monitor's lock held: it may call back into it.
  monitor.WatchLastWqe("rxe0", 7, [&monitor, &reached] {
    ++reached;
    monitor.UnwatchLastWqe("rxe0", 8);
  });
  monitor.WatchLastWqe("rxe0", 8, [&reached] { reached += 10; });
  monitor.ReportLastWqe("rxe0", 7);
  monitor.ReportLastWqe("rxe0", 8);
  EXPECT_EQ(reached, 1);
}

}  // namespace
}  // namespace rdmad::verbs
