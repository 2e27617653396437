// Which Peer.Connect handshake may configure a data path: the rule both the
// verbs acceptor and tests use, kept apart from ibv_* so it is unit-tested.
//
// A caller numbers its handshakes (generation) within one run (incarnation).
// A handshake that is not newer than the one in use (a late retry, a replay)
// must not replace it: it would tear down QPs the caller is using and point
// new ones at stale parameters. A new incarnation means the caller restarted
// and its numbering started over, so any generation of it is new.
#ifndef RDMAD_DAEMON_TRANSPORT_HANDSHAKE_H_
#define RDMAD_DAEMON_TRANSPORT_HANDSHAKE_H_

#include <cstdint>
#include <optional>

namespace rdmad::transport {

struct HandshakeId {
  uint64_t incarnation = 0;
  uint64_t generation = 0;
};

// True if `incoming` must be refused because `current` (the handshake in
// use for the same caller, if any) is as new or newer.
inline bool HandshakeIsStale(const std::optional<HandshakeId>& current,
                             const HandshakeId& incoming) {
  return current.has_value() && current->incarnation == incoming.incarnation &&
         current->generation >= incoming.generation;
}

}  // namespace rdmad::transport

#endif  // RDMAD_DAEMON_TRANSPORT_HANDSHAKE_H_
