#include "daemon/config/size_values.h"

#include <cstddef>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/size.h"

namespace rdmad::config {
namespace {

using google::protobuf::FieldDescriptor;

bool IsIdentifierStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }
bool IsIdentifierPart(char c) { return absl::ascii_isalnum(c) || c == '_'; }
// What an unquoted size may be made of: digits, a point, a suffix.
bool IsSizePart(char c) { return absl::ascii_isalnum(c) || c == '.'; }

// Where in the text a position is, for messages (1-based, as the parser's).
std::string Where(const std::string& source, const std::string& text,
                  size_t pos) {
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < pos; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return absl::StrCat(source, ":", line, ":", pos - line_start + 1);
}

// The end of the quoted string that starts at `pos` (one past its closing
// quote), or text.size() if it is not closed (the parser reports that).
size_t SkipQuoted(const std::string& text, size_t pos) {
  const char quote = text[pos];
  for (size_t i = pos + 1; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == quote) {
      return i + 1;
    } else if (text[i] == '\n') {
      return i;
    }
  }
  return text.size();
}

}  // namespace

bool IsSizeField(const FieldDescriptor& field) {
  const bool integer = field.cpp_type() == FieldDescriptor::CPPTYPE_UINT64 ||
                       field.cpp_type() == FieldDescriptor::CPPTYPE_UINT32 ||
                       field.cpp_type() == FieldDescriptor::CPPTYPE_INT64;
  if (!integer) return false;
  for (absl::string_view word : absl::StrSplit(field.name(), '_')) {
    if (word == "bytes") return true;
  }
  return false;
}

absl::StatusOr<std::string> ExpandSizeValues(
    const std::string& text, const google::protobuf::Descriptor& message,
    const std::string& source) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const char c = text[pos];
    if (c == '#') {  // a comment, to the end of its line
      const size_t end = text.find('\n', pos);
      const size_t stop = end == std::string::npos ? text.size() : end;
      out.append(text, pos, stop - pos);
      pos = stop;
      continue;
    }
    if (c == '"' || c == '\'') {
      const size_t end = SkipQuoted(text, pos);
      out.append(text, pos, end - pos);
      pos = end;
      continue;
    }
    if (!IsIdentifierStart(c)) {
      out.push_back(c);
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < text.size() && IsIdentifierPart(text[end])) ++end;
    const std::string name = text.substr(pos, end - pos);
    out.append(name);
    pos = end;
    const FieldDescriptor* field = message.FindFieldByName(name);
    if (field == nullptr || !IsSizeField(*field)) continue;
    // "name", blanks, ':', blanks, then the value.
    size_t colon = pos;
    while (colon < text.size() && (text[colon] == ' ' || text[colon] == '\t')) {
      ++colon;
    }
    if (colon >= text.size() || text[colon] != ':') continue;
    size_t value = colon + 1;
    while (value < text.size() && (text[value] == ' ' || text[value] == '\t')) {
      ++value;
    }
    out.append(text, pos, value - pos);
    pos = value;
    if (value >= text.size()) break;
    size_t value_end;
    std::string size_text;
    if (text[value] == '"' || text[value] == '\'') {
      value_end = SkipQuoted(text, value);
      if (value_end <= value + 1 || text[value_end - 1] != text[value]) {
        continue;  // not closed: the parser says so
      }
      size_text = text.substr(value + 1, value_end - value - 2);
    } else {
      value_end = value;
      while (value_end < text.size() && IsSizePart(text[value_end])) {
        ++value_end;
      }
      size_text = text.substr(value, value_end - value);
      // A plain number, or something the parser will name (a sign, a
      // bracket): left to it.
      if (size_text.empty() ||
          size_text.find_first_not_of("0123456789") == std::string::npos) {
        continue;
      }
    }
    absl::StatusOr<uint64_t> bytes = ParseSize(size_text);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(source, text, value), ": field '", name, "': ",
          bytes.status().message(),
          " (give bytes or a size like 4G, 512Mi, 1.5G)"));
    }
    absl::StrAppend(&out, *bytes);
    pos = value_end;
  }
  return out;
}

}  // namespace rdmad::config
