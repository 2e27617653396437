#include "daemon/peer/descriptor_codec.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/region_address.h"

namespace rdmad::peer {
namespace {

constexpr absl::string_view kPrefix = "rdmad1:";

}  // namespace

std::string EncodeDescriptor(const v1::RegionDescriptor& descriptor) {
  std::string bytes;
  descriptor.SerializeToString(&bytes);
  return absl::StrCat(kPrefix, absl::WebSafeBase64Escape(bytes));
}

absl::StatusOr<v1::RegionDescriptor> DecodeDescriptor(absl::string_view text) {
  if (text.size() > kMaxEncodedDescriptor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "region descriptor is ", text.size(), " bytes long; real ones are "
        "far shorter (limit ", kMaxEncodedDescriptor, ")"));
  }
  if (!absl::StartsWith(text, kPrefix)) {
    return absl::InvalidArgumentError(
        "not a region descriptor: it must start with 'rdmad1:' (get one with "
        "rdmactl descriptor NAME on the daemon that holds the region)");
  }
  std::string bytes;
  if (!absl::WebSafeBase64Unescape(text.substr(kPrefix.size()), &bytes)) {
    return absl::InvalidArgumentError(
        "region descriptor is damaged: bad base64 after 'rdmad1:'");
  }
  v1::RegionDescriptor descriptor;
  if (!descriptor.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(
        "region descriptor is damaged: its contents do not parse");
  }
  if (absl::Status s = ValidatePeerAddress(descriptor.peer()); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("region descriptor names no usable peer: ", s.message()));
  }
  if (descriptor.length() == 0 || descriptor.incarnation() == 0) {
    return absl::InvalidArgumentError(
        "region descriptor has no length or incarnation: it is incomplete");
  }
  return descriptor;
}

core::RemoteRegionInfo RegionInfoFromProto(const v1::RegionDescriptor& d) {
  core::RemoteRegionInfo info;
  info.peer = d.peer();
  info.incarnation = d.incarnation();
  info.region_id = d.region_id();
  info.name = d.name();
  info.length = d.length();
  info.access = v1::Access_IsValid(d.access())
                    ? static_cast<core::RemoteAccess>(d.access())
                    : core::RemoteAccess::kNone;
  info.addr = d.addr();
  for (const auto& key : d.keys()) {
    info.rkeys.push_back({key.device(), 0, key.rkey()});
  }
  info.tcp_key = d.tcp_key();
  return info;
}

}  // namespace rdmad::peer
