// Region descriptors as printable strings, to pass out of band:
//   "rdmad1:" + web-safe base64 (no padding) of a serialized RegionDescriptor.
#ifndef RDMAD_DAEMON_PEER_DESCRIPTOR_CODEC_H_
#define RDMAD_DAEMON_PEER_DESCRIPTOR_CODEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/transfer.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::peer {

// Longest encoded descriptor accepted; real ones are ~100 bytes.
inline constexpr size_t kMaxEncodedDescriptor = 4096;

std::string EncodeDescriptor(const v1::RegionDescriptor& descriptor);

// INVALID_ARGUMENT, saying what is wrong, for anything that is not a
// well-formed descriptor (wrong prefix, bad base64, bad message, missing
// peer, zero length).
absl::StatusOr<v1::RegionDescriptor> DecodeDescriptor(absl::string_view text);

// The descriptor as the peer layer and the transports use it. Access values
// outside the enum count as no access.
core::RemoteRegionInfo RegionInfoFromProto(const v1::RegionDescriptor& d);

}  // namespace rdmad::peer

#endif  // RDMAD_DAEMON_PEER_DESCRIPTOR_CODEC_H_
