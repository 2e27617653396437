#include "daemon/transport/tcp/address_slots.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

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

std::string PeerHostOf(int fd) {
  sockaddr_storage ss{};
  socklen_t length = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &length) != 0) {
    return "";
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    if (::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) == nullptr) {
      return "";
    }
    return text;
  }
  if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    // ::ffff:a.b.c.d is a.b.c.d: one peer, one count, either way it came.
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      if (::inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text,
                      sizeof(text)) == nullptr) {
        return "";
      }
      return text;
    }
    if (::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text)) ==
        nullptr) {
      return "";
    }
    return text;
  }
  return "";
}

bool IsLoopbackHost(const std::string& host) {
  return host.rfind("127.", 0) == 0 || host == "::1";
}

}  // namespace rdmad::tcp
