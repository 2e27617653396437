// Where one rail's QPs go in a Connect request or answer: the first rail's
// in `qps`, every other rail's in its entry of `extra_rails`. Shared by the
// connector (verbs_transport.cc) and the acceptor (verbs_acceptor.cc).
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_CONNECT_RAILS_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_CONNECT_RAILS_H_

#include <cstddef>

#include "google/protobuf/repeated_ptr_field.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::verbs {

// Where rail `rail`'s QPs go in a Connect request or answer: `qps` for the
// first rail, else the rail's entry of `extra_rails` (added as needed).
template <typename Message>
google::protobuf::RepeatedPtrField<v1::QpEndpoint>* RailQps(Message* message,
                                                            size_t rail) {
  if (rail == 0) return message->mutable_qps();
  while (static_cast<size_t>(message->extra_rails_size()) < rail) {
    message->add_extra_rails();
  }
  return message->mutable_extra_rails(static_cast<int>(rail - 1))
      ->mutable_qps();
}

// The QPs `message` carries for rail `rail`: none past its last rail (an
// rdmad without rails answers for the first one only).
template <typename Message>
const google::protobuf::RepeatedPtrField<v1::QpEndpoint>& RailQpsOf(
    const Message& message, size_t rail) {
  if (rail == 0) return message.qps();
  if (rail > static_cast<size_t>(message.extra_rails_size())) {
    return v1::VerbsRail::default_instance().qps();
  }
  return message.extra_rails(static_cast<int>(rail - 1)).qps();
}

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_CONNECT_RAILS_H_
