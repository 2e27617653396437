// HandshakeAdmission against fake timers: the bound on handshakes in
// flight, waiting in order, the deadline and queue bounds (told to retry,
// never left hanging), shutdown and the cold start's jitter.
#include "daemon/peer/handshake_admission.h"

#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/peer_fakes.h"

namespace rdmad::peer {
namespace {

using testing::FakeTimers;
using ::testing::HasSubstr;
using Ticket = HandshakeAdmission::Ticket;

// Records what each Enter was granted, keeping the tickets until released.
struct Entries {
  std::vector<std::optional<absl::StatusOr<Ticket>>> got;

  HandshakeAdmission::Grant Next() {
    const size_t i = got.size();
    got.emplace_back();
    return [this, i](absl::StatusOr<Ticket> t) { got[i] = std::move(t); };
  }
  bool Granted(size_t i) const { return got[i].has_value() && got[i]->ok(); }
  void Release(size_t i) { got[i]->value().Return(); }
};

TEST(HandshakeAdmissionTest, AtMostMaxInFlightTheRestInTheOrderTheyCame) {
  FakeTimers timers;
  HandshakeAdmission admission({.role = "initiator", .max_in_flight = 2},
                               &timers);
  Entries e;
  for (int i = 0; i < 5; ++i) {
    admission.Enter(timers.Now() + absl::Seconds(10), e.Next());
  }
  EXPECT_TRUE(e.Granted(0));
  EXPECT_TRUE(e.Granted(1));
  for (int i = 2; i < 5; ++i) EXPECT_FALSE(e.got[i].has_value()) << i;
  EXPECT_EQ(admission.stats().in_flight, 2u);
  EXPECT_EQ(admission.stats().queued, 3u);
  e.Release(1);
  EXPECT_TRUE(e.Granted(2));
  EXPECT_FALSE(e.got[3].has_value()) << "one slot freed, one granted";
  e.Release(0);
  EXPECT_TRUE(e.Granted(3));
  EXPECT_FALSE(e.got[4].has_value());
  e.Release(2);
  e.Release(3);
  EXPECT_TRUE(e.Granted(4));
  e.Release(4);
  const HandshakeAdmissionStats s = admission.stats();
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.peak_in_flight, 2u);
  EXPECT_EQ(s.peak_queued, 3u);
  EXPECT_EQ(s.admitted, 5u);
  EXPECT_EQ(s.waited, 3u);
  EXPECT_EQ(timers.pending(), 0u) << "deadline timers left behind";
}

TEST(HandshakeAdmissionTest, AWaiterWhoseDeadlineComesFirstIsToldToRetry) {
  FakeTimers timers;
  HandshakeAdmission admission({.role = "responder", .max_in_flight = 1},
                               &timers);
  Entries e;
  admission.Enter(timers.Now() + absl::Seconds(10), e.Next());
  admission.Enter(timers.Now() + absl::Seconds(1), e.Next());
  admission.Enter(timers.Now() + absl::Seconds(10), e.Next());
  timers.Advance(absl::Seconds(2));
  ASSERT_TRUE(e.got[1].has_value());
  EXPECT_EQ(e.got[1]->status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(e.got[1]->status().message(),
              HasSubstr("handshakes as responder are busy"));
  EXPECT_THAT(e.got[1]->status().message(), HasSubstr("retry"));
  EXPECT_EQ(admission.stats().expired, 1u);
  // The one behind it keeps its place.
  e.Release(0);
  EXPECT_TRUE(e.Granted(2));
}

TEST(HandshakeAdmissionTest, AFullQueueRefusesAtOnce) {
  FakeTimers timers;
  HandshakeAdmission admission(
      {.role = "responder", .max_in_flight = 1, .max_queued = 1}, &timers);
  Entries e;
  for (int i = 0; i < 3; ++i) {
    admission.Enter(timers.Now() + absl::Seconds(10), e.Next());
  }
  EXPECT_TRUE(e.Granted(0));
  EXPECT_FALSE(e.got[1].has_value());
  ASSERT_TRUE(e.got[2].has_value());
  EXPECT_EQ(e.got[2]->status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(admission.stats().refused, 1u);
}

TEST(HandshakeAdmissionTest, ShutdownAnswersEveryWaiter) {
  FakeTimers timers;
  Entries e;
  {
    HandshakeAdmission admission({.role = "responder", .max_in_flight = 1},
                                 &timers);
    admission.Enter(absl::InfiniteFuture(), e.Next());
    admission.Enter(absl::InfiniteFuture(), e.Next());
    admission.Shutdown();
    ASSERT_TRUE(e.got[1].has_value());
    EXPECT_EQ(e.got[1]->status().code(), absl::StatusCode::kUnavailable);
    admission.Enter(absl::InfiniteFuture(), e.Next());
    ASSERT_TRUE(e.got[2].has_value());
    EXPECT_EQ(e.got[2]->status().code(), absl::StatusCode::kUnavailable);
  }
  // A ticket outliving its admission returns its slot harmlessly.
  e.Release(0);
}

TEST(HandshakeAdmissionTest, GrantsThatReturnAtOnceDoNotRecurse) {
  FakeTimers timers;
  HandshakeAdmission admission(
      {.role = "initiator", .max_in_flight = 1, .max_queued = 100000}, &timers);
  std::optional<absl::StatusOr<Ticket>> first;
  admission.Enter(absl::InfiniteFuture(),
                  [&](absl::StatusOr<Ticket> t) { first = std::move(t); });
  int granted = 0;
  // Each of these returns its slot as soon as it has it: 100,000 of them
  // in a row would overflow the stack if each grant ran inside the last.
  for (int i = 0; i < 100000; ++i) {
    admission.Enter(absl::InfiniteFuture(), [&](absl::StatusOr<Ticket> t) {
      ASSERT_TRUE(t.ok());
      ++granted;
    });
  }
  first->value().Return();
  EXPECT_EQ(granted, 100000);
  EXPECT_EQ(admission.stats().in_flight, 0u);
}

TEST(HandshakeAdmissionTest, DuringTheColdStartEachEntersAfterItsJitter) {
  FakeTimers timers;
  HandshakeAdmission admission({.role = "initiator",
                                .max_in_flight = 8,
                                .cold_start = absl::Seconds(5),
                                .cold_start_jitter = absl::Milliseconds(20)},
                               &timers);
  Entries e;
  admission.Enter(absl::InfiniteFuture(), e.Next());
  EXPECT_FALSE(e.got[0].has_value()) << "not in the first instant";
  timers.Advance(absl::Milliseconds(21));
  EXPECT_TRUE(e.Granted(0));
  // After the cold start: at once.
  timers.Advance(absl::Seconds(5));
  admission.Enter(absl::InfiniteFuture(), e.Next());
  EXPECT_TRUE(e.Granted(1));
}

}  // namespace
}  // namespace rdmad::peer
