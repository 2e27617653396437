// ReceiveBuffer: bytes committed after a read are handed out in order,
// consumed in any pieces, and the free space is moved to the front before
// the next read so that a partial frame never limits it.
#include "daemon/transport/tcp/receive_buffer.h"

#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace rdmad::tcp {
namespace {

std::string Held(const ReceiveBuffer& b) {
  return std::string(reinterpret_cast<const char*>(b.data().data()),
                     b.size());
}

void Put(ReceiveBuffer& b, const std::string& bytes) {
  const iovec space = b.Space();
  ASSERT_GE(space.iov_len, bytes.size());
  std::memcpy(space.iov_base, bytes.data(), bytes.size());
  b.Commit(bytes.size());
}

TEST(ReceiveBufferTest, HandsOutWhatWasCommittedInOrder) {
  ReceiveBuffer b;
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.Space().iov_len, ReceiveBuffer::kCapacity);
  Put(b, "header-1payload");
  EXPECT_EQ(Held(b), "header-1payload");
  b.Consume(8);
  EXPECT_EQ(Held(b), "payload");
  Put(b, "+more");
  EXPECT_EQ(Held(b), "payload+more");
  b.Consume(12);
  EXPECT_TRUE(b.empty());
}

TEST(ReceiveBufferTest, MovesAPartialFrameToTheFrontBeforeTheNextRead) {
  ReceiveBuffer b;
  Put(b, std::string(ReceiveBuffer::kCapacity - 10, 'x'));
  Put(b, "0123456789");
  EXPECT_EQ(b.Space().iov_len, 0u) << "full";
  b.Consume(ReceiveBuffer::kCapacity - 4);
  EXPECT_EQ(Held(b), "6789");
  const iovec space = b.Space();
  EXPECT_EQ(space.iov_len, ReceiveBuffer::kCapacity - 4);
  EXPECT_EQ(Held(b), "6789") << "the partial frame kept, at the front";
  EXPECT_EQ(static_cast<const uint8_t*>(space.iov_base), b.data().data() + 4);
}

TEST(ReceiveBufferTest, ClearForgetsTheBytes) {
  ReceiveBuffer b;
  Put(b, "half a frame");
  b.Clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.Space().iov_len, ReceiveBuffer::kCapacity);
}

}  // namespace
}  // namespace rdmad::tcp
