// The checks a serving daemon makes on a verbs Peer.Connect before it
// creates anything for it.
//
// A ConnectRequest comes from another daemon: untrusted input. These
// functions look only at the message (and, for a grow, at how many QPs the
// pool serves now), never at a device, so that the acceptor can refuse a
// request before a QP exists, and unit tests and fuzzers can run them
// without RDMA. What depends on this side's port (the path MTU, the GRH)
// is checked per QP by ResolvePath (queue_pair.h), the endpoints' wire
// form by FromProto (verbs_transport.h).
//
// Example (VerbsAcceptor::Accept):
//   RDMAD_RETURN_IF_ERROR(CheckConnectRequest(request, most));
//   ...under the lock, the served pool's QPs per rail in `served`:
//   RDMAD_RETURN_IF_ERROR(CheckGrowFits(request, served, most));
//
// Thread-safety: pure functions.
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_CONNECT_CHECKS_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_CONNECT_CHECKS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::verbs {

// The shape of a Connect: at most kMaxRails rails, at most
// `max_qps_per_connect` QP endpoints on each, endpoints on at least one
// rail, and the caller's Peer address. InvalidArgument naming the limit
// otherwise.
absl::Status CheckConnectRequest(const v1::ConnectRequest& request,
                                 uint32_t max_qps_per_connect);

// Whether a grow (`request.grow()`, already through CheckConnectRequest)
// fits the pool it is for: `served[r]` is how many QPs that pool serves on
// the caller's rail r (0 or past the end: the rail is not served). A rail
// the grow adds QPs to must be served (FailedPrecondition: connect again)
// and may not pass `max_qps_per_connect` QPs (InvalidArgument naming the
// limit and the size it would have).
absl::Status CheckGrowFits(const v1::ConnectRequest& request,
                           absl::Span<const size_t> served,
                           uint32_t max_qps_per_connect);

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_CONNECT_CHECKS_H_
