// AddressSlots: the per-address cap on the TCP data port's connections.
#include "daemon/transport/tcp/address_slots.h"

#include <optional>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace rdmad::tcp {
namespace {

TEST(AddressSlotsTest, AnAddressHoldsAtMostTheCapAndOthersAreUnaffected) {
  AddressSlots slots(3);
  std::vector<AddressSlots::Slot> held;
  for (int i = 0; i < 3; ++i) {
    std::optional<AddressSlots::Slot> slot = slots.TryTake("192.0.2.7");
    ASSERT_TRUE(slot.has_value()) << i;
    held.push_back(*std::move(slot));
  }
  EXPECT_FALSE(slots.TryTake("192.0.2.7").has_value());
  EXPECT_EQ(slots.held("192.0.2.7"), 3u);
  // Another address has its own slots.
  std::optional<AddressSlots::Slot> other = slots.TryTake("192.0.2.8");
  EXPECT_TRUE(other.has_value());
  EXPECT_EQ(slots.addresses(), 2u);
}

TEST(AddressSlotsTest, ASlotComesBackWhenDestroyedNotWhenMoved) {
  AddressSlots slots(1);
  {
    std::optional<AddressSlots::Slot> slot = slots.TryTake("10.0.0.1");
    ASSERT_TRUE(slot.has_value());
    AddressSlots::Slot moved = *std::move(slot);
    slot.reset();  // the moved-from slot returns nothing
    EXPECT_EQ(slots.held("10.0.0.1"), 1u);
    EXPECT_FALSE(slots.TryTake("10.0.0.1").has_value());
  }
  EXPECT_EQ(slots.held("10.0.0.1"), 0u);
  EXPECT_EQ(slots.addresses(), 0u);  // no entry left behind per address
  EXPECT_TRUE(slots.TryTake("10.0.0.1").has_value());
}

TEST(AddressSlotsTest, AssigningOverASlotReturnsIt) {
  AddressSlots slots(1);
  std::optional<AddressSlots::Slot> a = slots.TryTake("10.0.0.1");
  std::optional<AddressSlots::Slot> b = slots.TryTake("10.0.0.2");
  ASSERT_TRUE(a.has_value() && b.has_value());
  *a = *std::move(b);
  EXPECT_EQ(slots.held("10.0.0.1"), 0u);
  EXPECT_EQ(slots.held("10.0.0.2"), 1u);
}

TEST(AddressSlotsTest, RefusalsLeaveNoEntries) {
  AddressSlots slots(1);
  std::optional<AddressSlots::Slot> a = slots.TryTake("10.0.0.1");
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(slots.TryTake("10.0.0.1"));
  a.reset();
  EXPECT_EQ(slots.addresses(), 0u);
}

TEST(AddressSlotsTest, ZeroMeansNoCap) {
  AddressSlots slots(0);
  std::vector<AddressSlots::Slot> held;
  for (int i = 0; i < 1000; ++i) {
    std::optional<AddressSlots::Slot> slot = slots.TryTake("10.0.0.1");
    ASSERT_TRUE(slot.has_value());
    held.push_back(*std::move(slot));
  }
  EXPECT_EQ(slots.held("10.0.0.1"), 1000u);
}

TEST(AddressSlotsTest, SlotsMayOutliveTheirAddressSlots) {
  std::optional<AddressSlots::Slot> slot;
  {
    AddressSlots slots(2);
    slot = slots.TryTake("10.0.0.1");
    ASSERT_TRUE(slot.has_value());
  }
  slot.reset();  // ASan would report a use after free here
}

TEST(AddressSlotsTest, ADefaultSlotHoldsNothing) {
  AddressSlots::Slot none;
  AddressSlots slots(1);
  std::optional<AddressSlots::Slot> a = slots.TryTake("10.0.0.1");
  ASSERT_TRUE(a.has_value());
  *a = std::move(none);  // returns a's slot, takes nothing
  EXPECT_EQ(slots.held("10.0.0.1"), 0u);
}

}  // namespace
}  // namespace rdmad::tcp
