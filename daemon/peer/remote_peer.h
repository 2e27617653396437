// RemotePeer: everything this daemon keeps about one remote daemon — its
// connection (state machine and data channel), its name cache and its
// counters — shared by the registry (PeerTable) and the transfers running
// to it.
#ifndef RDMAD_DAEMON_PEER_REMOTE_PEER_H_
#define RDMAD_DAEMON_PEER_REMOTE_PEER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/peer/name_cache.h"
#include "daemon/peer/peer_connection.h"

namespace rdmad::peer {

struct RemotePeer {
  RemotePeer(std::string peer_address, uint32_t holder,
             core::TransportMode mode, PeerConnectionContext context)
      : address(std::move(peer_address)),
        holder_uid(holder),
        names(std::make_shared<NameCache>(address, context.connector,
                                          context.timers)),
        connection(std::make_shared<PeerConnection>(
            address, mode, context,
            // What a Hello resolved goes to the name cache.
            [names = std::weak_ptr<NameCache>(names)](
                uint64_t incarnation, std::vector<ResolvedName> resolved) {
              if (auto cache = names.lock()) {
                cache->Insert(incarnation, std::move(resolved));
              }
            })) {}

  const std::string address;
  // The local uid whose transfer added this peer: its slot in the table
  // counts against that uid (PeerTableOptions::max_peers_per_uid), whoever
  // uses the peer later.
  const uint32_t holder_uid;
  const std::shared_ptr<NameCache> names;
  const std::shared_ptr<PeerConnection> connection;

  std::atomic<uint64_t> bytes_written{0};
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> ops_completed{0};
  std::atomic<uint64_t> ops_failed{0};
  std::atomic<int64_t> in_flight{0};
  // absl::ToUnixNanos of the last transfer's start (for idle eviction).
  std::atomic<int64_t> last_used_ns{0};
};

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_REMOTE_PEER_H_
