// AddressSlots: how many data connections each source address holds, so
// that one address cannot take every slot of the TCP data port.
//
// The data port has max_open_connections slots for all peers together.
// Without a cap per address, whoever can reach the port (anyone, with
// peer_allow empty) could open them all and hold them, and every other
// peer's data connections would then be refused at accept. A peer is
// granted max_connections_per_peer connections in Peer.Connect; its
// address may hold a few times that (reconnects overlapping the old
// connections' close, several daemons behind one address as on a test
// host's loopback), and no more.
//
// A Slot is the right to one connection: taken at accept, returned when
// the Slot is destroyed (with the connection, or with an accept whose
// connection never started). Slots may outlive the AddressSlots.
// Thread-safe.
//
// Example:
//   AddressSlots slots(64);
//   std::optional<AddressSlots::Slot> slot = slots.TryTake("192.0.2.7");
//   if (!slot) ... refuse the connection ...
#ifndef RDMAD_DAEMON_TRANSPORT_TCP_ADDRESS_SLOTS_H_
#define RDMAD_DAEMON_TRANSPORT_TCP_ADDRESS_SLOTS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace rdmad::tcp {

class AddressSlots {
 private:
  struct State;

 public:
  class Slot {
   public:
    // Holds no slot: for a connection that is not counted.
    Slot() = default;
    Slot(Slot&& other) noexcept = default;
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot();

   private:
    friend class AddressSlots;
    Slot(std::shared_ptr<State> state, std::string address)
        : state_(std::move(state)), address_(std::move(address)) {}
    void Return();

    std::shared_ptr<State> state_;  // null once returned or moved from
    std::string address_;
  };

  // `max_per_address` 0: no cap (slots are still counted).
  explicit AddressSlots(uint32_t max_per_address);

  // A slot for one more connection from `address` (an address without its
  // port), or nullopt when the address holds max_per_address already.
  std::optional<Slot> TryTake(const std::string& address);

  // Connections `address` holds now.
  uint32_t held(const std::string& address) const;
  // Addresses that hold at least one.
  size_t addresses() const;

 private:
  struct State {
    mutable absl::Mutex mu;
    absl::flat_hash_map<std::string, uint32_t> held ABSL_GUARDED_BY(mu);
  };

  const uint32_t max_per_address_;
  const std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace rdmad::tcp

#endif  // RDMAD_DAEMON_TRANSPORT_TCP_ADDRESS_SLOTS_H_
