// Conversions between the client library's public types (rdmad/info.h,
// rdmad/client.h) and the rdmad.v1 messages it speaks to the daemon. Kept
// out of the public headers so that applications never see protobuf.
#ifndef RDMAD_CLIENT_CONVERT_H_
#define RDMAD_CLIENT_CONVERT_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"
#include "rdmad/client.h"
#include "rdmad/info.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::client_internal {

// A gRPC status as an absl::Status with the same code and message.
absl::Status FromGrpc(const grpc::Status& status);

// The state whose name (`name_of`: PortStateName, PeerStateName...) is
// `text`, as the daemon sends states; kUnknown for a name this library
// does not know (from a newer daemon). Walks the enum from its first value
// after kUnknown until `name_of` says "unknown" (past the last).
template <typename State>
State StateNamed(absl::string_view text, absl::string_view (*name_of)(State)) {
  const absl::string_view unknown = name_of(State::kUnknown);
  for (int i = 1;; ++i) {
    const State state = static_cast<State>(i);
    const absl::string_view name = name_of(state);
    if (name == unknown) return State::kUnknown;
    if (name == text) return state;
  }
}

v1::Access ToProto(Access access);
Access FromProto(v1::Access access);
// TRANSPORT_UNSPECIFIED is kNone: the daemon reports a copy within itself
// so on its gRPC calls.
Transport FromProto(v1::TransportKind kind);
v1::RemoteRegion ToProto(const RemoteRegion& remote);

DaemonStatus FromProto(const v1::GetStatusResponse& status);
DeviceList FromProto(const v1::ListDevicesResponse& devices);
RegionInfo FromProto(const v1::RegionInfo& region);
PeerInfo FromProto(const v1::PeerInfo& peer);
QpInfo FromProto(const v1::QpInfo& qp);
QueueInfo FromProto(const v1::QueueInfo& queue);
RemoteRegionInfo FromProto(const std::string& peer,
                           const v1::ExportedRegion& region);
DirectoryStatus FromProto(const v1::DirectoryStatus& directory);
ClusterRegion FromProto(const v1::ClusterRegion& region);
ClusterRegionList FromProto(const v1::ListClusterRegionsResponse& list);
ClusterLookup FromProto(const v1::LookupRegionResponse& lookup);

}  // namespace rdmad::client_internal

#endif  // RDMAD_CLIENT_CONVERT_H_
