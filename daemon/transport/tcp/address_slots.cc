#include "daemon/transport/tcp/address_slots.h"

#include <utility>

namespace rdmad::tcp {

AddressSlots::Slot& AddressSlots::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Return();
    state_ = std::move(other.state_);
    address_ = std::move(other.address_);
  }
  return *this;
}

AddressSlots::Slot::~Slot() { Return(); }

void AddressSlots::Slot::Return() {
  if (state_ == nullptr) return;
  {
    absl::MutexLock lock(&state_->mu);
    auto it = state_->held.find(address_);
    if (it != state_->held.end() && --it->second == 0) state_->held.erase(it);
  }
  state_ = nullptr;
}

AddressSlots::AddressSlots(uint32_t max_per_address)
    : max_per_address_(max_per_address) {}

std::optional<AddressSlots::Slot> AddressSlots::TryTake(
    const std::string& address) {
  {
    absl::MutexLock lock(&state_->mu);
    uint32_t& held = state_->held[address];
    if (max_per_address_ != 0 && held >= max_per_address_) {
      if (held == 0) state_->held.erase(address);
      return std::nullopt;
    }
    ++held;
  }
  return Slot(state_, address);
}

uint32_t AddressSlots::held(const std::string& address) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->held.find(address);
  return it == state_->held.end() ? 0 : it->second;
}

size_t AddressSlots::addresses() const {
  absl::MutexLock lock(&state_->mu);
  return state_->held.size();
}

}  // namespace rdmad::tcp
