// Conversions between core structs and rdmad.v1 messages.
#ifndef RDMAD_DAEMON_SERVICE_PROTO_CONVERT_H_
#define RDMAD_DAEMON_SERVICE_PROTO_CONVERT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/device_info.h"
#include "daemon/core/export_access_list.h"
#include "daemon/core/region.h"
#include "daemon/core/region_table.h"
#include "daemon/core/transport_kind.h"
#include "daemon/peer/transport_kind_proto.h"
#include "daemon/service/daemon_identity.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::service {

core::RemoteAccess FromProto(v1::Access access);
v1::Access ToProto(core::RemoteAccess access);

// An Access field as received: INVALID_ARGUMENT naming `field` for a value
// outside the enum (proto3 keeps unknown numbers).
absl::StatusOr<core::RemoteAccess> AccessFromProto(int access,
                                                   absl::string_view field);

// ExportRegionRequest.allow -> an access list (INVALID_ARGUMENT naming the
// bad entry); null for an empty one.
absl::StatusOr<std::shared_ptr<const core::ExportAccessList>> FromProto(
    const google::protobuf::RepeatedPtrField<v1::ExportGrant>& grants);

// A RegionRef must name a region by id or by name.
absl::StatusOr<core::RegionKey> FromProto(const v1::RegionRef& ref);

// `show_keys`: rkeys are shown only to callers that may manage the region.
void ToProto(const core::RegionSnapshot& region, bool show_keys,
             v1::RegionInfo* out);
void ToProto(const core::DeviceInfo& device, v1::DeviceInfo* out);

// The descriptor peers use to address an exported region of this daemon.
void ToDescriptor(const DaemonIdentity& identity,
                  const core::RegionSnapshot& region,
                  v1::RegionDescriptor* out);

// Transport kinds convert in the peer layer, below this one.
using peer::ToProto;

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_PROTO_CONVERT_H_
