// TurnBatch: work deferred to the end of an event-loop turn runs once per
// turn however often it is named, when the outermost scope closes, on the
// same thread; outside a scope nothing is deferred.
#include "daemon/runtime/turn_batch.h"

#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace rdmad::runtime {
namespace {

class Counting final : public TurnDeferred {
 public:
  void FlushTurn() override {
    ++flushes;
    if (then) then();
  }
  int flushes = 0;
  std::function<void()> then;
};

TEST(TurnBatchTest, DefersOncePerTurnUntilTheOutermostScopeCloses) {
  auto a = std::make_shared<Counting>();
  auto b = std::make_shared<Counting>();
  EXPECT_FALSE(TurnBatch::Active());
  {
    TurnBatch::Scope turn;
    EXPECT_TRUE(TurnBatch::Active());
    EXPECT_TRUE(TurnBatch::Defer(a));
    {
      TurnBatch::Scope inner;
      EXPECT_TRUE(TurnBatch::Defer(b));
      EXPECT_TRUE(TurnBatch::Defer(a));
    }
    EXPECT_EQ(a->flushes, 0) << "an inner scope joins the outer one";
    EXPECT_TRUE(TurnBatch::Defer(a));
  }
  EXPECT_FALSE(TurnBatch::Active());
  EXPECT_EQ(a->flushes, 1);
  EXPECT_EQ(b->flushes, 1);
  // The next turn starts empty.
  { TurnBatch::Scope turn; }
  EXPECT_EQ(a->flushes, 1);
}

TEST(TurnBatchTest, OutsideAScopeTheCallerFlushesItself) {
  auto a = std::make_shared<Counting>();
  EXPECT_FALSE(TurnBatch::Defer(a));
  EXPECT_EQ(a->flushes, 0);
}

TEST(TurnBatchTest, KeepsWhatItFlushesAliveAndFlushesWithNoScopeOpen) {
  std::weak_ptr<Counting> weak;
  bool active_in_flush = true;
  {
    TurnBatch::Scope turn;
    auto a = std::make_shared<Counting>();
    a->then = [&] { active_in_flush = TurnBatch::Active(); };
    weak = a;
    TurnBatch::Defer(std::move(a));
    EXPECT_FALSE(weak.expired()) << "held until flushed";
  }
  EXPECT_TRUE(weak.expired()) << "let go once flushed";
  EXPECT_FALSE(active_in_flush);
}

TEST(TurnBatchTest, EachThreadHasItsOwnBatch) {
  auto a = std::make_shared<Counting>();
  TurnBatch::Scope turn;
  TurnBatch::Defer(a);
  bool other_active = true;
  std::thread([&] { other_active = TurnBatch::Active(); }).join();
  EXPECT_FALSE(other_active);
  EXPECT_EQ(a->flushes, 0);
}

}  // namespace
}  // namespace rdmad::runtime
