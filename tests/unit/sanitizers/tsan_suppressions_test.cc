// Guards fuzz/tsan.supp: each test here makes, on purpose and every time, a
// pattern that ThreadSanitizer misreports because Debian's libraries are not
// built with it, in the shape CI's TSan build sees (clang, line tables only).
// In the TSan pass (halt_on_error=1) a suppression that stops matching fails
// its test here, at once, rather than as a rare flake in whatever test
// happens to hit the pattern. In other builds these tests only check that
// the pattern is correct code.
//
// Why this exists: with -g1 an inlined frame is named without its scope
// ("Unref", not "absl::debian3::Status::Unref"), so a suppression written
// against full names silently stopped matching, and a TcpPeerChannel test
// failed in CI once in many runs.
#include <atomic>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/status/status.h"

namespace rdmad {
namespace {

// absl::Status counts references to its heap part: the copy is counted in
// the header (seen by TSan), the release partly in libabsl_status.so (not
// seen). When the last holder frees it on another thread than the one that
// copied it, TSan sees a free racing with the copy's increment.
TEST(TsanSuppressionsTest, AStatusCopiedOnOneThreadIsFreedByItsLastHolderOnAnother) {
  std::atomic<int> step{0};
  absl::Status shared;
  std::thread holder([&] {
    // A message makes the status heap-allocated, hence reference-counted.
    absl::Status mine = absl::UnavailableError(std::string(64, 'x'));
    shared = mine;
    step.store(1, std::memory_order_release);
    // Relaxed on purpose: the only ordering between the other thread's
    // releases and the free below is the reference count itself, as in
    // rdmad when an operation's callback keeps a status its channel drops.
    while (step.load(std::memory_order_relaxed) != 2) std::this_thread::yield();
  });
  while (step.load(std::memory_order_acquire) != 1) std::this_thread::yield();
  absl::Status copy = shared;
  EXPECT_EQ(copy.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(copy.message(), std::string(64, 'x'));
  shared = absl::OkStatus();
  copy = absl::OkStatus();
  step.store(2, std::memory_order_relaxed);
  holder.join();
}

}  // namespace
}  // namespace rdmad
