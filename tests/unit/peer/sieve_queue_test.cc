// SieveQueue on its own: the hand's order, what a use buys, entries that
// are kept or taken whatever their bit, erasing under the hand, and a long
// random run checked against a plain model of SIEVE and for its cost.
#include "daemon/peer/sieve_queue.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace rdmad::peer {
namespace {

using Queue = SieveQueue<int>;

auto Evictable() {
  return [](const int&) { return SieveChoice::kIfUnvisited; };
}

TEST(SieveQueueTest, AnUnusedQueueGivesUpItsOldestFirst) {
  Queue q;
  EXPECT_FALSE(q.Choose(Evictable()).has_value());
  for (int i = 1; i <= 3; ++i) q.Insert(i);
  for (int expected = 1; expected <= 3; ++expected) {
    auto victim = q.Choose(Evictable());
    ASSERT_TRUE(victim.has_value());
    EXPECT_EQ(Queue::Value(*victim), expected);
    q.Erase(*victim);
  }
  EXPECT_TRUE(q.empty());
}

TEST(SieveQueueTest, AUsedEntrySurvivesOneRoundOfTheHand) {
  Queue q;
  auto one = q.Insert(1);
  q.Insert(2);
  q.Insert(3);
  Queue::Touch(one);
  auto victim = q.Choose(Evictable());
  ASSERT_TRUE(victim.has_value());
  EXPECT_EQ(Queue::Value(*victim), 2) << "1 was used: its bit is spent";
  EXPECT_FALSE(Queue::Visited(one));
  q.Erase(*victim);
  // The hand goes on from where it stopped (3), then wraps to 1, now unused.
  victim = q.Choose(Evictable());
  ASSERT_TRUE(victim.has_value());
  EXPECT_EQ(Queue::Value(*victim), 3);
  q.Erase(*victim);
  victim = q.Choose(Evictable());
  ASSERT_TRUE(victim.has_value());
  EXPECT_EQ(Queue::Value(*victim), 1);
}

TEST(SieveQueueTest, KeptEntriesAreNeverChosenAndTakenOnesAreAtOnce) {
  Queue q;
  for (int i = 1; i <= 4; ++i) Queue::Touch(q.Insert(i));
  // 1 and 2 are kept, whatever happens; 4 is taken though used.
  auto classify = [](const int& v) {
    if (v <= 2) return SieveChoice::kKeep;
    if (v == 4) return SieveChoice::kTake;
    return SieveChoice::kIfUnvisited;
  };
  auto victim = q.Choose(classify);
  ASSERT_TRUE(victim.has_value());
  EXPECT_EQ(Queue::Value(*victim), 4) << "3 only lost its bit";
  q.Erase(*victim);
  victim = q.Choose(classify);
  ASSERT_TRUE(victim.has_value());
  EXPECT_EQ(Queue::Value(*victim), 3);
  q.Erase(*victim);
  EXPECT_FALSE(q.Choose(classify).has_value()) << "only kept entries left";
  EXPECT_EQ(q.size(), 2u);
}

TEST(SieveQueueTest, ErasingTheEntryUnderTheHandMovesTheHandOn) {
  Queue q;
  auto one = q.Insert(1);
  auto two = q.Insert(2);
  q.Insert(3);
  auto victim = q.Choose(Evictable());
  ASSERT_TRUE(victim.has_value());
  ASSERT_EQ(*victim, one);
  q.Erase(one);  // as a sweep would, with the hand on it
  Queue::Touch(two);
  victim = q.Choose(Evictable());
  ASSERT_TRUE(victim.has_value());
  EXPECT_EQ(Queue::Value(*victim), 3);
  q.Erase(*victim);
  q.Erase(two);
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.Choose(Evictable()).has_value());
  q.Insert(4);  // the hand starts again at the tail
  victim = q.Choose(Evictable());
  ASSERT_TRUE(victim.has_value());
  EXPECT_EQ(Queue::Value(*victim), 4);
}

// SIEVE as the paper states it, over a vector (O(n) per step): the oracle.
class ModelSieve {
 public:
  void Insert(int key) {
    order_.insert(order_.begin(), key);  // head first
    visited_[key] = false;
    if (hand_ >= 0) ++hand_;  // it names the same entry
  }
  void Touch(int key) { visited_[key] = true; }
  int Evict(const absl::flat_hash_set<int>& kept) {
    if (hand_ < 0) hand_ = static_cast<int>(order_.size()) - 1;
    for (;;) {
      const int key = order_[hand_];
      if (!kept.contains(key) && !visited_[key]) {
        order_.erase(order_.begin() + hand_);
        visited_.erase(key);
        // Toward the head: one index down; from the head, to the tail.
        --hand_;
        if (hand_ < 0) hand_ = static_cast<int>(order_.size()) - 1;
        return key;
      }
      visited_[key] = false;
      hand_ = hand_ == 0 ? static_cast<int>(order_.size()) - 1 : hand_ - 1;
    }
  }

 private:
  std::vector<int> order_;
  absl::flat_hash_map<int, bool> visited_;
  int hand_ = -1;
};

// 10,000 admissions into 1,024 slots, under a skewed workload with a few
// entries held in use: every choice matches the model, kept entries are
// never chosen, and the hand's steps stay O(1) per admission.
TEST(SieveQueueTest, TenThousandAdmissionsMatchTheModelAtAmortizedO1) {
  constexpr int kSlots = 1024;
  constexpr int kAdmissions = 10000;
  Queue q;
  ModelSieve model;
  absl::flat_hash_map<int, Queue::Handle> handles;
  absl::flat_hash_set<int> kept;
  std::mt19937 rng(7);
  size_t steps = 0;
  auto classify = [&](const int& v) {
    ++steps;
    return kept.contains(v) ? SieveChoice::kKeep : SieveChoice::kIfUnvisited;
  };
  int next_key = 0;
  size_t touches = 0;
  size_t evictions = 0;
  for (int admitted = 0; admitted < kAdmissions; ++admitted) {
    // A few uses of entries already in, the recent ones most.
    for (int u = 0; u < 3 && !handles.empty(); ++u) {
      const int span = std::min<int>(next_key, 256);
      const int key = next_key - 1 - static_cast<int>(rng() % span);
      auto it = handles.find(key);
      if (it == handles.end()) continue;
      Queue::Touch(it->second);
      model.Touch(key);
      ++touches;
    }
    // Now and then one entry is held in use for a while.
    if (admitted % 500 == 0 && !handles.empty()) kept.insert(next_key - 1);
    if (admitted % 500 == 250) kept.clear();
    if (static_cast<int>(handles.size()) == kSlots) {
      auto victim = q.Choose(classify);
      ASSERT_TRUE(victim.has_value()) << admitted;
      const int key = Queue::Value(*victim);
      ASSERT_EQ(key, model.Evict(kept)) << "admission " << admitted;
      ASSERT_FALSE(kept.contains(key));
      q.Erase(*victim);
      handles.erase(key);
      ++evictions;
    }
    const int key = next_key++;
    handles[key] = q.Insert(key);
    model.Insert(key);
    ASSERT_LE(q.size(), static_cast<size_t>(kSlots));
  }
  EXPECT_EQ(q.size(), static_cast<size_t>(kSlots));
  // Each step clears a bit a use set, ends a walk, or passes the one kept
  // entry (at most twice a walk).
  EXPECT_EQ(evictions, static_cast<size_t>(kAdmissions - kSlots));
  EXPECT_LE(steps, touches + 3 * evictions) << steps;
}

}  // namespace
}  // namespace rdmad::peer
