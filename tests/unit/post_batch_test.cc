#include "daemon/transport/post_batch.h"

#include <memory>

#include "gtest/gtest.h"

namespace rdmad::transport {
namespace {

class CountingChannel : public Flushable {
 public:
  void Flush() override { ++flushes; }
  int flushes = 0;
};

TEST(PostBatchTest, WithoutABatchChannelsPostAtOnce) {
  auto channel = std::make_shared<CountingChannel>();
  EXPECT_FALSE(PostBatch::Open());
  EXPECT_FALSE(PostBatch::Defer(channel));
  EXPECT_EQ(channel->flushes, 0);
}

TEST(PostBatchTest, EachChannelIsFlushedOnceAtTheEnd) {
  auto a = std::make_shared<CountingChannel>();
  auto b = std::make_shared<CountingChannel>();
  {
    PostBatch batch;
    EXPECT_TRUE(PostBatch::Open());
    for (int i = 0; i < 10; ++i) {
      EXPECT_TRUE(PostBatch::Defer(a));
      EXPECT_TRUE(PostBatch::Defer(b));
    }
    EXPECT_EQ(a->flushes, 0);
    EXPECT_EQ(b->flushes, 0);
  }
  EXPECT_FALSE(PostBatch::Open());
  EXPECT_EQ(a->flushes, 1);
  EXPECT_EQ(b->flushes, 1);
}

TEST(PostBatchTest, AChannelNotOwnedBySharedPtrPostsAtOnce) {
  PostBatch batch;
  EXPECT_FALSE(PostBatch::Defer(std::weak_ptr<Flushable>()));
}

TEST(PostBatchTest, TheBatchKeepsItsChannelsAlive) {
  auto channel = std::make_shared<CountingChannel>();
  std::weak_ptr<CountingChannel> watch = channel;
  CountingChannel* raw = channel.get();
  int flushes_seen = 0;
  {
    PostBatch batch;
    ASSERT_TRUE(PostBatch::Defer(channel));
    channel.reset();  // the peer layer replaced it
    ASSERT_FALSE(watch.expired());
    flushes_seen = raw->flushes;
  }
  EXPECT_EQ(flushes_seen, 0);
  EXPECT_TRUE(watch.expired());  // flushed, then released
}

TEST(PostBatchTest, NestedBatchesFlushTheirOwnChannels) {
  auto outer_channel = std::make_shared<CountingChannel>();
  auto inner_channel = std::make_shared<CountingChannel>();
  {
    PostBatch outer;
    ASSERT_TRUE(PostBatch::Defer(outer_channel));
    {
      PostBatch inner;
      ASSERT_TRUE(PostBatch::Defer(inner_channel));
    }
    EXPECT_EQ(inner_channel->flushes, 1);
    EXPECT_EQ(outer_channel->flushes, 0);
    EXPECT_TRUE(PostBatch::Open());
  }
  EXPECT_EQ(outer_channel->flushes, 1);
  EXPECT_FALSE(PostBatch::Open());
}

}  // namespace
}  // namespace rdmad::transport
