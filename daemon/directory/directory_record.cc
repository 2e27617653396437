#include "daemon/directory/directory_record.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/region_address.h"
#include "google/protobuf/util/json_util.h"

namespace rdmad::directory {
namespace {

std::string ToJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // Cannot fail for these plain messages.
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

}  // namespace

std::string EncodeRegionRecord(const v1::DirectoryRegionRecord& record) {
  return ToJson(record);
}

std::string EncodeNodeRecord(const v1::DirectoryNodeRecord& record) {
  return ToJson(record);
}

absl::StatusOr<v1::DirectoryRegionRecord> DecodeRegionRecord(
    absl::string_view name, absl::string_view value) {
  if (value.size() > kMaxRecordBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "record is ", value.size(), " bytes, more than ", kMaxRecordBytes));
  }
  v1::DirectoryRegionRecord record;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (auto s = google::protobuf::util::JsonStringToMessage(
          std::string(value), &record, options);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("record is not a DirectoryRegionRecord: ",
                     std::string(s.message())));
  }
  if (record.name() != name) {
    return absl::InvalidArgumentError(absl::StrCat(
        "record names region '", record.name(), "' under the key of '", name,
        "'"));
  }
  if (absl::Status s = ValidateRegionName(record.name()); !s.ok()) return s;
  if (absl::Status s = ValidatePeerAddress(record.node()); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("record's node: ", s.message()));
  }
  if (record.access() != v1::ACCESS_READ &&
      record.access() != v1::ACCESS_WRITE &&
      record.access() != v1::ACCESS_READ_WRITE) {
    return absl::InvalidArgumentError(
        absl::StrCat("record's access ", record.access(), " is not r, w or rw"));
  }
  if (record.identity().size() > 255 ||
      std::any_of(record.identity().begin(), record.identity().end(),
                  [](char c) { return c < ' ' || c > '~'; })) {
    return absl::InvalidArgumentError(
        "record's identity is not a printable certificate name");
  }
  if (record.size() == 0 || record.incarnation() == 0 ||
      record.region_id() == 0) {
    return absl::InvalidArgumentError(
        "record has no size, incarnation or region id");
  }
  return record;
}

core::DirectoryEntry ToEntry(const v1::DirectoryRegionRecord& record,
                             int64_t create_revision, int64_t mod_revision,
                             int64_t lease) {
  core::DirectoryEntry entry;
  entry.name = record.name();
  entry.node = record.node();
  entry.size = record.size();
  entry.access = static_cast<core::RemoteAccess>(record.access());
  entry.region_id = record.region_id();
  entry.generation = {record.incarnation(), mod_revision};
  entry.create_revision = create_revision;
  entry.exported = absl::FromUnixMillis(record.exported_unix_ms());
  entry.identity = record.identity();
  entry.lease = lease;
  entry.holder_ttl = absl::Seconds(record.lease_ttl_seconds());
  return entry;
}

}  // namespace rdmad::directory
