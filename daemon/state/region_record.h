// RegionRecord: what the next daemon needs to know about one kept region,
// as a small text document beside (or, in the fd store, alongside) the
// region's memory.
//
//   rdmad-region-record 1
//   slot 5f0c2a7e91d3b846
//   name kv-cache
//   size 1073741824
//   uid 1000
//   gid 1000
//   mode 0640
//   export rw
//   crc32c 8e1f7c21
//
// An export with an access list makes it format 2, with one line per entry
// after "export" ("allow 1000@10.0.0.2", C-escaped): a daemon that knows
// only format 1 refuses such a record rather than open the export to all.
//
// The slot names the region's memory and record (file names in a state
// directory, FDNAMEs in the fd store), so a region can be freed and its name
// reused at once. The parser is strict: exactly these lines in this order,
// one space after each key, canonical numbers, a checksum over everything
// above its line. Anything else is damage, reported with what was wrong;
// a damaged record is never half-used.
#ifndef RDMAD_DAEMON_STATE_REGION_RECORD_H_
#define RDMAD_DAEMON_STATE_REGION_RECORD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/core/region_keeper.h"

namespace rdmad::state {

// The newest record format this daemon writes and reads (it reads 1 too).
inline constexpr int kRecordFormat = 2;
// Records are a few hundred bytes, or a few KiB with a long access list;
// anything longer is damage.
inline constexpr size_t kMaxRecordBytes = 65536;

struct RegionRecord {
  std::string slot;  // 16 lowercase hex digits
  core::KeptRegionInfo info;
};

// A new random slot.
std::string NewSlot();
// The record of a new region `info`, in a new slot.
RegionRecord NewRecord(const core::KeptRegionInfo& info);
// True for 16 lowercase hex digits.
bool IsValidSlot(absl::string_view slot);

// The record as text (ends with a newline).
std::string EncodeRegionRecord(const RegionRecord& record);

// Parses a record. DATA_LOSS saying what is wrong for anything that is not
// exactly what EncodeRegionRecord writes for a valid record (region name
// rules, mode 0..0777, size 1..2^50, a matching checksum); a record of a
// newer format says so.
absl::StatusOr<RegionRecord> ParseRegionRecord(absl::string_view text);

// "none", "r", "w", "rw".
std::string ExportAccessName(core::RemoteAccess access);

}  // namespace rdmad::state

#endif  // RDMAD_DAEMON_STATE_REGION_RECORD_H_
