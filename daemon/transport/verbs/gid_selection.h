// Choosing the local port and GID index a QP uses.
//
// On RoCE a port has several GIDs per IP address: a RoCEv1 and a RoCEv2
// entry for the link-local IPv6 address, for each IPv6 address and for each
// IPv4 address (as an IPv4-mapped IPv6 GID). Two daemons must use GIDs of
// the same type and a routable address or the QPs never connect (the
// requester sees IBV_WC_RETRY_EXC_ERR). RoCEv2 over IPv4 is what a data
// centre network routes, so it is preferred; an operator can pin the index.
// The functions read the plain core::PortInfo that DiscoverDevices fills, so
// they are tested with synthetic tables.
//
// Example:
//   RDMAD_ASSIGN_OR_RETURN(uint32_t port, ChooseActivePort(info));
//   RDMAD_ASSIGN_OR_RETURN(uint32_t gid_index,
//                          ChooseGidIndex(info.ports[port - 1], std::nullopt));
//
// Thread-safety: pure functions, thread-safe.
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_GID_SELECTION_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_GID_SELECTION_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "daemon/core/device_info.h"

namespace rdmad::verbs {

// Returns the GID index to use on `port`:
//  - `configured`, if set; NotFound (listing the valid entries) when the
//    port has no valid GID at that index;
//  - else the lowest-index RoCEv2 GID that is IPv4-mapped (::ffff:a.b.c.d);
//  - else the lowest-index RoCEv2 GID;
//  - else 0 (InfiniBand ports and RoCEv1-only ports: index 0 is the port's
//    default GID).
// FailedPrecondition if the port has no valid GID at all (a RoCE port whose
// network device is down or has no address).
absl::StatusOr<uint32_t> ChooseGidIndex(const core::PortInfo& port,
                                        std::optional<uint32_t> configured);

// Returns the number (1-based) of the first port in state ACTIVE;
// FailedPrecondition naming each port's state if none is active.
absl::StatusOr<uint32_t> ChooseActivePort(const core::DeviceInfo& device);

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_GID_SELECTION_H_
