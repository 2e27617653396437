#include "daemon/state/region_record.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/region_address.h"
#include "common/secure_random.h"
#include "daemon/state/checksum.h"

namespace rdmad::state {
namespace {

constexpr char kMagic[] = "rdmad-region-record";
constexpr uint64_t kMaxSize = 1ULL << 50;

absl::Status Damaged(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("damaged record: ", what));
}

// A decimal number with no sign, no leading zero and no overflow.
bool ParseCanonical(absl::string_view text, uint64_t* value) {
  if (text.empty() || text.size() > 20 ||
      (text.size() > 1 && text.front() == '0')) {
    return false;
  }
  for (char c : text) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return absl::SimpleAtoi(text, value);
}

// "key value" -> value; the key must be exactly `key`.
absl::StatusOr<absl::string_view> Field(absl::string_view line,
                                        absl::string_view key) {
  if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, " ")) {
    return Damaged(absl::StrCat("expected '", key, " ...', found '",
                                absl::CEscape(line.substr(0, 40)), "'"));
  }
  return line;
}

absl::StatusOr<uint32_t> Id(absl::string_view line, absl::string_view key) {
  auto text = Field(line, key);
  if (!text.ok()) return text.status();
  uint64_t value = 0;
  if (!ParseCanonical(*text, &value) || value > 0xffffffffULL) {
    return Damaged(absl::StrCat(key, " '", absl::CEscape(*text),
                                "' is not a number 0..4294967295"));
  }
  return static_cast<uint32_t>(value);
}

}  // namespace

std::string NewSlot() { return absl::StrFormat("%016x", SecureRandom64()); }

RegionRecord NewRecord(const core::KeptRegionInfo& info) {
  return RegionRecord{.slot = NewSlot(), .info = info};
}

bool IsValidSlot(absl::string_view slot) {
  if (slot.size() != 16) return false;
  for (char c : slot) {
    if (!absl::ascii_isdigit(c) && (c < 'a' || c > 'f')) return false;
  }
  return true;
}

std::string ExportAccessName(core::RemoteAccess access) {
  switch (access) {
    case core::RemoteAccess::kNone:
      return "none";
    case core::RemoteAccess::kRead:
      return "r";
    case core::RemoteAccess::kWrite:
      return "w";
    case core::RemoteAccess::kReadWrite:
      return "rw";
  }
  return "none";
}

std::string EncodeRegionRecord(const RegionRecord& record) {
  const core::KeptRegionInfo& info = record.info;
  // Format 1 unless the export has an access list: a daemon that knows no
  // lists then refuses the record (another format) instead of bringing the
  // export back open to everyone.
  const int format = info.export_allow.empty() ? 1 : kRecordFormat;
  std::string text = absl::StrFormat(
      "%s %d\nslot %s\nname %s\nsize %d\nuid %d\ngid %d\nmode %04o\n"
      "export %s\n",
      kMagic, format, record.slot, info.name, info.size, info.acl.uid,
      info.acl.gid, info.acl.mode, ExportAccessName(info.export_access));
  for (const core::ExportGrant& grant : info.export_allow) {
    absl::StrAppend(&text, "allow ",
                    absl::CEscape(core::ExportAccessList::FormatGrant(grant)),
                    "\n");
  }
  absl::StrAppendFormat(&text, "crc32c %08x\n", Crc32c(text));
  return text;
}

absl::StatusOr<RegionRecord> ParseRegionRecord(absl::string_view text) {
  if (text.size() > kMaxRecordBytes) {
    return Damaged(absl::StrCat(text.size(),
                                " bytes, more than a record "
                                "can be (",
                                kMaxRecordBytes, ")"));
  }
  if (text.empty() || text.back() != '\n') {
    return Damaged("it does not end with a newline (cut short?)");
  }
  std::vector<absl::string_view> lines =
      absl::StrSplit(text.substr(0, text.size() - 1), '\n');
  // The format line first, so that a newer record says so rather than
  // failing on a line this daemon does not know.
  absl::string_view head = lines.front();
  if (!absl::ConsumePrefix(&head, kMagic) || !absl::ConsumePrefix(&head, " ")) {
    return Damaged("it does not start with 'rdmad-region-record'");
  }
  uint64_t format = 0;
  if (!ParseCanonical(head, &format)) {
    return Damaged("its format number is not a number");
  }
  if (format != 1 && format != kRecordFormat) {
    return absl::FailedPreconditionError(
        absl::StrCat("the record has format ", format,
                     " (written by another version of "
                     "rdmad); this rdmad reads formats 1 and ",
                     kRecordFormat));
  }
  // Format 1: nine lines; format 2: one "allow" line per access-list
  // entry (at least one) before the checksum.
  constexpr size_t kLines = 9;
  const size_t max_lines = kLines + core::ExportAccessList::kMaxEntries;
  if (format == 1 ? lines.size() != kLines
                  : lines.size() <= kLines || lines.size() > max_lines) {
    return Damaged(absl::StrCat(lines.size(), " lines for a format ", format,
                                " record"));
  }
  // The checksum covers every byte before its own line.
  const absl::string_view crc_line = lines.back();
  auto crc_text = Field(crc_line, "crc32c");
  if (!crc_text.ok()) return crc_text.status();
  const size_t covered = text.size() - crc_line.size() - 1;
  const std::string expected =
      absl::StrFormat("%08x", Crc32c(text.substr(0, covered)));
  if (*crc_text != expected) {
    return Damaged(absl::StrCat("checksum ", absl::CEscape(*crc_text),
                                " does not match its contents (", expected,
                                ")"));
  }

  RegionRecord record;
  core::KeptRegionInfo& info = record.info;
  auto slot = Field(lines[1], "slot");
  if (!slot.ok()) return slot.status();
  if (!IsValidSlot(*slot)) {
    return Damaged(absl::StrCat("slot '", absl::CEscape(*slot),
                                "' is not 16 lowercase hex digits"));
  }
  record.slot = std::string(*slot);
  auto name = Field(lines[2], "name");
  if (!name.ok()) return name.status();
  if (absl::Status s = ValidateRegionName(*name); !s.ok()) {
    return Damaged(s.message());
  }
  info.name = std::string(*name);
  auto size = Field(lines[3], "size");
  if (!size.ok()) return size.status();
  if (!ParseCanonical(*size, &info.size) || info.size == 0 ||
      info.size > kMaxSize) {
    return Damaged(absl::StrCat("size '", absl::CEscape(*size),
                                "' is not a number 1..", kMaxSize));
  }
  auto uid = Id(lines[4], "uid");
  if (!uid.ok()) return uid.status();
  info.acl.uid = *uid;
  auto gid = Id(lines[5], "gid");
  if (!gid.ok()) return gid.status();
  info.acl.gid = *gid;
  auto mode = Field(lines[6], "mode");
  if (!mode.ok()) return mode.status();
  if (mode->size() != 4 || mode->front() != '0' ||
      mode->find_first_not_of("01234567") != absl::string_view::npos) {
    return Damaged(
        absl::StrCat("mode '", absl::CEscape(*mode), "' is not 0000..0777"));
  }
  info.acl.mode = static_cast<uint32_t>(
      ((*mode)[1] - '0') * 64 + ((*mode)[2] - '0') * 8 + ((*mode)[3] - '0'));
  auto access = Field(lines[7], "export");
  if (!access.ok()) return access.status();
  if (*access == "none") {
    info.export_access = core::RemoteAccess::kNone;
  } else if (*access == "r") {
    info.export_access = core::RemoteAccess::kRead;
  } else if (*access == "w") {
    info.export_access = core::RemoteAccess::kWrite;
  } else if (*access == "rw") {
    info.export_access = core::RemoteAccess::kReadWrite;
  } else {
    return Damaged(absl::StrCat("export '", absl::CEscape(*access),
                                "' is not none, r, w or rw"));
  }
  for (size_t i = 8; i + 1 < lines.size(); ++i) {
    auto entry = Field(lines[i], "allow");
    if (!entry.ok()) return entry.status();
    std::string grant_text;
    if (!absl::CUnescape(*entry, &grant_text)) {
      return Damaged(absl::StrCat("allow '", absl::CEscape(*entry),
                                  "' is not a C-escaped entry"));
    }
    auto grant = core::ExportAccessList::ParseGrantText(grant_text);
    if (!grant.ok()) {
      return Damaged(absl::StrCat("allow entry: ", grant.status().message()));
    }
    info.export_allow.push_back(*std::move(grant));
  }
  if (!info.export_allow.empty() &&
      !core::ExportAccessList::Parse(info.export_allow).ok()) {
    return Damaged("its access list is not valid");
  }
  // Canonical: what was read is exactly what would be written.
  if (EncodeRegionRecord(record) != text) {
    return Damaged("it is not in canonical form");
  }
  return record;
}

}  // namespace rdmad::state
