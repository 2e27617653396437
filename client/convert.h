// Conversions between the client library's public types (rdmad/info.h,
// rdmad/client.h) and the rdmad.v1 messages it speaks to the daemon. Kept
// out of the public headers so that applications never see protobuf.
#ifndef RDMAD_CLIENT_CONVERT_H_
#define RDMAD_CLIENT_CONVERT_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"
#include "rdmad/client.h"
#include "rdmad/info.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::client_internal {

// A gRPC status as an absl::Status with the same code and message.
absl::Status FromGrpc(const grpc::Status& status);

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
