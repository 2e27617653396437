#include "client/rdmactl/format.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rdmad::rdmactl {
namespace {

// Appends one line with its trailing spaces removed.
void AppendLine(std::string& out, absl::string_view indent, std::string line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
  absl::StrAppend(&out, indent, line, "\n");
}

}  // namespace

Table::Table(std::vector<std::string> headers)
    : headers_(std::move(headers)), right_(headers_.size(), false) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

void Table::AlignRight(size_t column) {
  if (column < right_.size()) right_[column] = true;
}

std::string Table::Render(absl::string_view indent) const {
  std::vector<size_t> width(headers_.size(), 0);
  auto measure = [&width](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  measure(headers_);
  for (const auto& row : rows_) measure(row);

  std::string out;
  auto render_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line += "  ";
      const std::string pad(width[i] - row[i].size(), ' ');
      line += right_[i] ? pad + row[i] : row[i] + pad;
    }
    AppendLine(out, indent, std::move(line));
  };
  render_row(headers_);
  for (const auto& row : rows_) render_row(row);
  return out;
}

std::string RenderFields(
    const std::vector<std::pair<std::string, std::string>>& fields,
    absl::string_view indent) {
  size_t width = 0;
  for (const auto& [key, value] : fields) width = std::max(width, key.size());
  std::string out;
  for (const auto& [key, value] : fields) {
    AppendLine(out, indent,
               absl::StrCat(key, ":", std::string(width - key.size() + 2, ' '),
                            value));
  }
  return out;
}

std::string HumanDuration(absl::Duration duration) {
  if (duration <= absl::ZeroDuration()) return "0s";
  if (duration < absl::Seconds(1)) {
    return absl::StrCat(absl::ToInt64Milliseconds(duration), "ms");
  }
  int64_t seconds = absl::ToInt64Seconds(duration);
  const int64_t days = seconds / 86400;
  const int64_t hours = seconds / 3600 % 24;
  const int64_t minutes = seconds / 60 % 60;
  seconds %= 60;
  if (days > 0) return absl::StrCat(days, "d ", hours, "h ", minutes, "m");
  if (hours > 0) return absl::StrCat(hours, "h ", minutes, "m ", seconds, "s");
  if (minutes > 0) return absl::StrCat(minutes, "m ", seconds, "s");
  return absl::StrCat(seconds, "s");
}

absl::Status Failed(absl::string_view what, const absl::Status& cause) {
  if (cause.ok()) return cause;
  return absl::Status(cause.code(),
                      absl::StrCat(what, ": ",
                                   absl::StatusCodeToString(cause.code()), ": ",
                                   cause.message()));
}

int ExitStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kUnavailable:
      return 3;
    case absl::StatusCode::kNotFound:
      return 4;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return 5;
    case absl::StatusCode::kAlreadyExists:
      return 6;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 7;
    case absl::StatusCode::kResourceExhausted:
      return 8;
    case absl::StatusCode::kDeadlineExceeded:
      return 9;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted:
      return 10;
    default:
      return 1;
  }
}

}  // namespace rdmad::rdmactl
