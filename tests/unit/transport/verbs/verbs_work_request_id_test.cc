// The wr_id layout (daemon/transport/verbs/work_request_id.h): sends and
// receives round-trip, the bits sit where completions already in flight
// expect them, and a sequence wraps at 2^55 instead of touching the flag.
#include "daemon/transport/verbs/work_request_id.h"

#include <cstddef>
#include <cstdint>

#include "gtest/gtest.h"

namespace rdmad::verbs {
namespace {

TEST(WorkRequestIdTest, SendsAndReceivesRoundTrip) {
  struct Case {
    size_t qp;
    bool receive;
    uint64_t value;  // the sequence of a send, the slot of a receive
  };
  const Case cases[] = {
      {0, false, 0},
      {1, false, 1},
      {7, false, 123456789},
      {255, false, WorkRequestId::kSequenceMask},
      {0, true, 0},
      {3, true, 17},
      {255, true, 0xffffffffu},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "qp " << c.qp << " receive "
                                    << c.receive << " value " << c.value);
    const WorkRequestId sent = c.receive
                                   ? WorkRequestId::Receive(c.qp, c.value)
                                   : WorkRequestId::Send(c.qp, c.value);
    const WorkRequestId id = WorkRequestId::Decode(sent.Encode());
    EXPECT_EQ(id.qp, c.qp);
    EXPECT_EQ(id.receive, c.receive);
    EXPECT_EQ(id.receive ? uint64_t{id.slot} : id.sequence, c.value);
    EXPECT_EQ(id.receive ? id.sequence : uint64_t{id.slot}, 0u);
  }
}

TEST(WorkRequestIdTest, BitLayout) {
  EXPECT_EQ(WorkRequestId::Send(2, 5).Encode(), (uint64_t{2} << 56) | 5);
  EXPECT_EQ(WorkRequestId::Receive(2, 5).Encode(),
            (uint64_t{2} << 56) | (uint64_t{1} << 55) | 5);
  EXPECT_EQ(WorkRequestId::Send(0xff, 0).Encode(), uint64_t{0xff} << 56);
}

TEST(WorkRequestIdTest, SequenceWrapsBelowTheReceiveBit) {
  const uint64_t past = WorkRequestId::kSequenceMask + 3;
  const WorkRequestId id = WorkRequestId::Send(1, past);
  EXPECT_EQ(id.sequence, 2u);
  EXPECT_EQ(id.Encode() & WorkRequestId::kReceiveBit, 0u);
  EXPECT_FALSE(WorkRequestId::Decode(id.Encode()).receive);
}

}  // namespace
}  // namespace rdmad::verbs
