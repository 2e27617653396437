// The descriptor codec moved to daemon/peer/descriptor_codec.h (the peer
// layer decodes descriptors, and the services sit above it). This header
// keeps the old names working for existing includes.
#ifndef RDMAD_DAEMON_SERVICE_DESCRIPTOR_CODEC_H_
#define RDMAD_DAEMON_SERVICE_DESCRIPTOR_CODEC_H_

#include "daemon/peer/descriptor_codec.h"

namespace rdmad::service {

using ::rdmad::peer::DecodeDescriptor;
using ::rdmad::peer::EncodeDescriptor;
using ::rdmad::peer::kMaxEncodedDescriptor;

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_DESCRIPTOR_CODEC_H_
