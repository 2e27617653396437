// RegionReleaser: a region whose last reference an event loop drops is torn
// down on the releaser's thread; anywhere else, at once.
#include "daemon/core/region_releaser.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/core/region_table.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/callers.h"
#include "tests/unit/fakes/teardown_recorder.h"

namespace rdmad::core {
namespace {

using core::testing::kAlice;

using ::rdmad::core::testing::RunOnServingThread;
using ::rdmad::core::testing::TeardownRecorder;

constexpr absl::Duration kPatience = absl::Seconds(30);

// Whether `addr` is still mapped in this process (mincore says ENOMEM for
// an unmapped page).
bool Mapped(const void* addr) {
  unsigned char in_core;
  const uintptr_t page = reinterpret_cast<uintptr_t>(addr) &
                         ~static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE) - 1);
  return ::mincore(reinterpret_cast<void*>(page), 1, &in_core) == 0 ||
         errno != ENOMEM;
}

class RegionReleaserTest : public ::testing::Test {
 protected:
  std::shared_ptr<Region> Allocate(const std::string& name,
                                   uint64_t size = 1 << 20) {
    AllocateOptions o;
    o.name = name;
    o.size = size;
    o.daemon_owned = true;
    auto r = table_->Allocate(kAlice, o);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return nullptr;
    // Touched, as a region in use is: its pages must be freed too.
    std::memset((*r)->data(), 0x5a, (*r)->size());
    EXPECT_TRUE(table_->Free(kAlice, {0, name}).ok());
    return *std::move(r);
  }

  TeardownRecorder registrar_;
  std::unique_ptr<RegionTable> table_ = std::make_unique<RegionTable>(
      &registrar_, RegionLimits{1ull << 30, 1ull << 30, 0, 0, "the limit"});
};

TEST_F(RegionReleaserTest, ALastReferenceDroppedOnAServingThreadIsHandedOver) {
  std::shared_ptr<Region> region = Allocate("big", 8 << 20);
  ASSERT_NE(region, nullptr);
  const void* addr = region->data();
  uint64_t handed_over_there = 0;
  RunOnServingThread("test-loop", [&] {
    region.reset();
    // Handed over, not torn down here: the loop goes on at once.
    handed_over_there = table_->releaser().handed_over();
  });
  EXPECT_EQ(handed_over_there, 1u);
  ASSERT_TRUE(table_->releaser().WaitIdle(kPatience));
  EXPECT_EQ(table_->releaser().released(), 1u);
  EXPECT_FALSE(Mapped(addr));
  EXPECT_EQ(registrar_.threads(),
            std::vector<std::string>{"rdmad-release"});
}

TEST_F(RegionReleaserTest, ALastReferenceDroppedElsewhereIsTornDownAtOnce) {
  std::shared_ptr<Region> region = Allocate("here");
  ASSERT_NE(region, nullptr);
  const void* addr = region->data();
  std::thread t([&] {
    ::pthread_setname_np(::pthread_self(), "test-handler");
    region.reset();
    // Gone before the drop returns, as FreeRegion's callers expect.
    EXPECT_FALSE(Mapped(addr));
  });
  t.join();
  EXPECT_EQ(table_->releaser().handed_over(), 0u);
  EXPECT_EQ(registrar_.threads(),
            std::vector<std::string>{"test-handler"});
}

TEST_F(RegionReleaserTest, ARegionThatOutlivesItsTableIsTornDownWhereDropped) {
  std::shared_ptr<Region> region = Allocate("late");
  ASSERT_NE(region, nullptr);
  const void* addr = region->data();
  table_.reset();
  RunOnServingThread("test-loop", [&] {
    region.reset();
    EXPECT_FALSE(Mapped(addr));
  });
  EXPECT_EQ(registrar_.threads(), std::vector<std::string>{"test-loop"});
}

TEST_F(RegionReleaserTest, DestroyingTheTableTearsDownEverythingHandedOver) {
  constexpr int kRegions = 16;
  std::vector<std::shared_ptr<Region>> regions;
  std::vector<const void*> addrs;
  for (int i = 0; i < kRegions; ++i) {
    regions.push_back(Allocate("r" + std::to_string(i)));
    ASSERT_NE(regions.back(), nullptr);
    addrs.push_back(regions.back()->data());
  }
  RunOnServingThread("test-loop", [&] { regions.clear(); });
  table_.reset();  // joins the releaser after its last teardown
  for (const void* addr : addrs) EXPECT_FALSE(Mapped(addr));
  const std::vector<std::string> on = registrar_.threads();
  EXPECT_EQ(on.size(), static_cast<size_t>(kRegions));
  for (const std::string& name : on) EXPECT_EQ(name, "rdmad-release");
}

// Room for one registration at a time, like a locked-memory limit; the
// teardown of a registration waits for `hold` to be notified.
class OneAtATimeRegistrar final : public MemoryRegistrar {
 public:
  class Held final : public Registration {
   public:
    explicit Held(OneAtATimeRegistrar* owner) : owner_(owner) {}
    ~Held() override {
      owner_->hold.WaitForNotification();
      absl::MutexLock lock(&owner_->mu_);
      owner_->held_ = false;
    }
    const std::vector<DeviceRegistration>& keys() const override {
      return keys_;
    }

   private:
    OneAtATimeRegistrar* owner_;
    std::vector<DeviceRegistration> keys_;
  };

  absl::StatusOr<std::unique_ptr<Registration>> Register(
      void*, size_t, RemoteAccess) override {
    absl::MutexLock lock(&mu_);
    ++attempts_;
    if (held_) {
      return absl::ResourceExhaustedError("ibv_reg_mr: Cannot allocate memory");
    }
    held_ = true;
    return std::make_unique<Held>(this);
  }
  int attempts() const {
    absl::MutexLock lock(&mu_);
    return attempts_;
  }

  absl::Notification hold;

 private:
  mutable absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  int attempts_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(RegionReleaserWaitTest, AnAllocationShortOfMemoryWaitsForTeardownsUnderWay) {
  OneAtATimeRegistrar registrar;
  RegionTable table(&registrar,
                    RegionLimits{1ull << 30, 1ull << 30, 0, 0, "the limit"});
  AllocateOptions o;
  o.name = "old";
  o.size = 1 << 20;
  o.daemon_owned = true;
  auto old = table.Allocate(kAlice, o);
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE(table.Free(kAlice, {0, "old"}).ok());
  // An event loop drops it last: its teardown is under way, held.
  RunOnServingThread("test-loop", [&] { old->reset(); });
  ASSERT_TRUE(table.releaser().busy());

  std::thread finish([&] {
    absl::SleepFor(absl::Milliseconds(50));
    registrar.hold.Notify();
  });
  o.name = "new";
  auto fresh = table.Allocate(kAlice, o);
  finish.join();
  // Refused while the old one held the room, then registered once it went.
  EXPECT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(registrar.attempts(), 3);
  EXPECT_FALSE(table.releaser().busy());
}

TEST_F(RegionReleaserTest, WaitIdleWithNothingHandedOverReturnsAtOnce) {
  EXPECT_TRUE(table_->releaser().WaitIdle(absl::ZeroDuration()));
}

}  // namespace
}  // namespace rdmad::core
