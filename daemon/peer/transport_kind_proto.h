// core::TransportKind <-> rdmad.v1.TransportKind, declared once for every
// layer that speaks the protocol: the peer layer (Hello, Connect) and the
// gRPC services above it (status, peers, results).
//
// The wire knows only the transports that cross it (verbs and TCP); kNone
// and kLocal go out as TRANSPORT_UNSPECIFIED, and any number the wire does
// not know (proto3 keeps unknown values) comes in as kNone.
#ifndef RDMAD_DAEMON_PEER_TRANSPORT_KIND_PROTO_H_
#define RDMAD_DAEMON_PEER_TRANSPORT_KIND_PROTO_H_

#include "daemon/core/transport_kind.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::peer {

v1::TransportKind ToProto(core::TransportKind kind);

// `kind` is an int because a received enum field may hold any number.
core::TransportKind FromProto(int kind);

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_TRANSPORT_KIND_PROTO_H_
