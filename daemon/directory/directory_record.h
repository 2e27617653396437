// Encoding of the cluster directory's records (proto/rdmad/v1/directory.proto
// as JSON) and the checks every record read back must pass: etcd is shared,
// so a value under our prefix may have been written by anything.
#ifndef RDMAD_DAEMON_DIRECTORY_DIRECTORY_RECORD_H_
#define RDMAD_DAEMON_DIRECTORY_DIRECTORY_RECORD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/region_resolver.h"
#include "rdmad/v1/directory.pb.h"

namespace rdmad::directory {

// Largest record value read or written; larger values are refused unparsed.
inline constexpr size_t kMaxRecordBytes = 4096;

std::string EncodeRegionRecord(const v1::DirectoryRegionRecord& record);
std::string EncodeNodeRecord(const v1::DirectoryNodeRecord& record);

// Parses and checks a region record found under the key of region `name`:
// the name must match the key, the node be a HOST:PORT, the access one of
// r/w/rw, size and incarnation non-zero, the identity a printable name.
// INVALID_ARGUMENT saying what is wrong otherwise. Unknown JSON fields are
// ignored (newer writers).
absl::StatusOr<v1::DirectoryRegionRecord> DecodeRegionRecord(
    absl::string_view name, absl::string_view value);

// A checked record plus the key's revisions and lease as the core's entry.
core::DirectoryEntry ToEntry(const v1::DirectoryRegionRecord& record,
                             int64_t create_revision, int64_t mod_revision,
                             int64_t lease = 0);

}  // namespace rdmad::directory

#endif  // RDMAD_DAEMON_DIRECTORY_DIRECTORY_RECORD_H_
