// The notifications the daemon holds for a receiver without room
// (daemon/ring/notification_backlog.h): one budget bounds every backlog of
// a uid, what does not fit is counted in order, backlogs merge by arrival,
// and the budget comes back with what leaves.
#include "daemon/ring/notification_backlog.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace rdmad::ring {
namespace {

PendingNotification Note(uint64_t sequence,
                         NotifiedOwner owner = NotifiedOwner::kUid) {
  PendingNotification n;
  n.sequence = sequence;
  n.owner = owner;
  n.immediate = static_cast<uint32_t>(sequence);
  n.writer = std::make_shared<const std::string>("10.0.0.2:7471");
  return n;
}

// What a receiver would read, in order: the immediates, and "lost N" as -N.
std::vector<int64_t> Drain(NotificationBacklog& backlog) {
  std::vector<int64_t> out;
  while (!backlog.empty()) {
    const PendingNotification& n = backlog.front();
    out.push_back(n.lost > 0 ? -static_cast<int64_t>(n.lost)
                             : static_cast<int64_t>(n.immediate));
    backlog.PopFront();
  }
  return out;
}

TEST(NotificationBacklogTest, PastTheBudgetLossesAreCountedInOrder) {
  auto budget = std::make_shared<NotificationBudget>(1000, 3);
  NotificationBacklog backlog(budget);
  for (uint64_t i = 1; i <= 3; ++i) EXPECT_TRUE(backlog.Add(Note(i)));
  EXPECT_FALSE(backlog.Add(Note(4)));
  EXPECT_FALSE(backlog.Add(Note(5)));
  EXPECT_EQ(backlog.held(), 3u);
  EXPECT_EQ(backlog.entries(), 4u) << "one marker for the run of two";
  EXPECT_EQ(backlog.lost(), 2u);
  EXPECT_EQ(budget->held(), 3u);
  EXPECT_EQ(budget->lost(), 2u);
  // Room again once the receiver took one: the next is kept, behind the
  // marker.
  backlog.PopFront();
  EXPECT_EQ(budget->held(), 2u);
  EXPECT_TRUE(backlog.Add(Note(6)));
  EXPECT_EQ(Drain(backlog), (std::vector<int64_t>{2, 3, -2, 6}));
  EXPECT_EQ(budget->held(), 0u) << "every notification gave its place back";
}

TEST(NotificationBacklogTest, OneBudgetBoundsEveryBacklogOfTheUid) {
  auto budget = std::make_shared<NotificationBudget>(1000, 4);
  NotificationBacklog a(budget);
  NotificationBacklog b(budget);
  EXPECT_TRUE(a.Add(Note(1)));
  EXPECT_TRUE(a.Add(Note(2)));
  EXPECT_TRUE(b.Add(Note(3)));
  EXPECT_TRUE(b.Add(Note(4)));
  EXPECT_FALSE(a.Add(Note(5)));
  EXPECT_FALSE(b.Add(Note(6)));
  EXPECT_EQ(budget->held(), 4u);
  EXPECT_EQ(budget->lost(), 2u);
  {
    NotificationBacklog gone = std::move(b);
    EXPECT_EQ(budget->held(), 4u) << "moving keeps the notifications";
  }
  EXPECT_EQ(budget->held(), 2u) << "destroyed: its two are given back";
  EXPECT_TRUE(a.Add(Note(7)));
}

TEST(NotificationBacklogTest, MergingKeepsTheOrderOfArrival) {
  auto budget = std::make_shared<NotificationBudget>(1000, 100);
  NotificationBacklog session(budget);
  NotificationBacklog uid(budget);
  session.Add(Note(2, NotifiedOwner::kSession));
  uid.Add(Note(1));
  uid.Add(Note(3));
  session.Add(Note(4, NotifiedOwner::kSession));
  NotificationBacklog queue(budget);
  queue.MergeFrom(session);
  queue.MergeFrom(uid);
  EXPECT_TRUE(session.empty());
  EXPECT_TRUE(uid.empty());
  EXPECT_EQ(queue.held(), 4u);
  EXPECT_EQ(budget->held(), 4u);
  EXPECT_EQ(Drain(queue), (std::vector<int64_t>{1, 2, 3, 4}));
}

TEST(NotificationBacklogTest, WhatIsOwnedMovesOutInOrderWithItsMarkers) {
  auto budget = std::make_shared<NotificationBudget>(1000, 3);
  NotificationBacklog queue(budget);
  queue.Add(Note(1, NotifiedOwner::kSession));
  queue.Add(Note(2));
  queue.Add(Note(3, NotifiedOwner::kSession));
  queue.Add(Note(4, NotifiedOwner::kSession));  // lost
  queue.Add(Note(5));                           // lost: a marker of its own
  NotificationBacklog own(budget);
  queue.MoveOwned(NotifiedOwner::kSession, own);
  EXPECT_EQ(Drain(own), (std::vector<int64_t>{1, 3, -1}));
  EXPECT_EQ(Drain(queue), (std::vector<int64_t>{2, -1}));
}

TEST(NotificationBacklogTest, DiscardingCountsWhatItHeldAsLost) {
  auto budget = std::make_shared<NotificationBudget>(1000, 10);
  NotificationBacklog backlog(budget);
  backlog.Add(Note(1));
  backlog.Add(Note(2));
  backlog.Discard();
  EXPECT_TRUE(backlog.empty());
  EXPECT_EQ(budget->held(), 0u);
  EXPECT_EQ(budget->lost(), 2u);
}

}  // namespace
}  // namespace rdmad::ring
