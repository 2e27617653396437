// Text building blocks of rdmactl's output: aligned tables, "key: value"
// blocks, human-readable sizes and durations, and the one error format.
//
// Example:
//   Table table({"ID", "NAME", "SIZE"});
//   table.AddRow({"1", "cache", HumanSize(1 << 20)});
//   std::fputs(table.Render().c_str(), stdout);
//   //  ID  NAME   SIZE
//   //  1   cache  1 MiB
//
// All functions are pure and thread-compatible.
#ifndef RDMAD_CLIENT_RDMACTL_FORMAT_H_
#define RDMAD_CLIENT_RDMACTL_FORMAT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace rdmad::rdmactl {

// A table of left-aligned text columns separated by two spaces, with a
// header row. Rows shorter than the header are padded with empty cells;
// extra cells are dropped. Lines carry no trailing spaces.
class Table {
 public:
  explicit Table(std::vector<std::string> headers);

  void AddRow(std::vector<std::string> cells);
  // Right-aligns column `column` (for numbers).
  void AlignRight(size_t column);
  bool empty() const { return rows_.empty(); }

  // Every line is prefixed with `indent`.
  std::string Render(absl::string_view indent = "") const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

// "key: value" lines with the values aligned, e.g. for `rdmactl status`.
std::string RenderFields(
    const std::vector<std::pair<std::string, std::string>>& fields,
    absl::string_view indent = "");

// Binary units with at most one decimal: "0 B", "512 B", "4 KiB",
// "1.5 MiB", "16 EiB". Exact multiples print without a decimal.
std::string HumanSize(uint64_t bytes);

// "450ms", "12s", "5m 3s", "2h 0m 7s", "3d 4h 5m"; negative as "0s".
std::string HumanDuration(absl::Duration duration);

// The status of a failed step, as rdmactl reports it: same code, message
// "<what>: <CODE>: <message>", e.g. "alloc r1: ALREADY_EXISTS: region 'r1'
// exists". main() prints it as "rdmactl: " + message.
absl::Status Failed(absl::string_view what, const absl::Status& cause);

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_FORMAT_H_
