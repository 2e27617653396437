// How rdmactl shows the daemon's answers: as text for people, or as JSON
// for scripts.
//
// Text: RenderStatus/Devices/Regions/Peers/Qps turn one response into the
// lines `rdmactl status` ... print. JSON: ToJson prints any response with
// protobuf's JSON printer, keeping the .proto field names and printing
// default-valued fields, so that a script sees `"region_count": "0"` rather
// than a missing key. (proto3 JSON prints 64-bit integers as strings.)
//
// All functions are pure and thread-compatible.
#ifndef RDMAD_CLIENT_RDMACTL_RENDER_H_
#define RDMAD_CLIENT_RDMACTL_RENDER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::rdmactl {

// One JSON document ending in a newline.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);

std::string TransportName(v1::TransportKind transport);  // "tcp", "verbs"
std::string AccessText(v1::Access access);               // "none", "r", ...
std::string OwnerText(const v1::RegionInfo& region);     // "session 3"

std::string RenderStatus(const v1::GetStatusResponse& status);
std::string RenderDevices(const v1::ListDevicesResponse& devices);
std::string RenderRegions(const v1::ListRegionsResponse& regions);
std::string RenderPeers(const v1::ListPeersResponse& peers);
std::string RenderQps(const v1::ListQpsResponse& qps);
// The cluster directory: `rdmactl ls` (ages against `now`) and `lookup`.
std::string RenderClusterRegions(const v1::ListClusterRegionsResponse& list,
                                 absl::Time now);
std::string RenderLookup(const v1::LookupRegionResponse& lookup);

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_RENDER_H_
