#include "daemon/peer/transport_kind_proto.h"

namespace rdmad::peer {

v1::TransportKind ToProto(core::TransportKind kind) {
  switch (kind) {
    case core::TransportKind::kVerbs:
      return v1::TRANSPORT_VERBS;
    case core::TransportKind::kTcp:
      return v1::TRANSPORT_TCP;
    case core::TransportKind::kNone:
    case core::TransportKind::kLocal:
      break;
  }
  return v1::TRANSPORT_UNSPECIFIED;
}

core::TransportKind FromProto(int kind) {
  switch (kind) {
    case v1::TRANSPORT_VERBS:
      return core::TransportKind::kVerbs;
    case v1::TRANSPORT_TCP:
      return core::TransportKind::kTcp;
    default:
      return core::TransportKind::kNone;
  }
}

}  // namespace rdmad::peer
